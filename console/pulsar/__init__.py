"""Fulcrum's connector to a real Apache Pulsar cluster through its admin REST API: the client
(``admin``) and the observation mapped onto Fulcrum's model (``observe``). No Django; the
services use it (``console.services.pulsar``)."""
