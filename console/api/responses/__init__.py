"""What every endpoint answers, for the OpenAPI schema: one serializer per shape, describing the
dicts the selectors and services return (the views return those dicts as they are). Each
module by subject; this package imports none of them (``console.api.serializers`` imports
``plans``, ``verbs`` imports ``console.api.serializers``)."""
