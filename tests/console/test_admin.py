from console.admin import BalancerConfigForm


def form(**changes):
    data = {
        "shedder": "ThresholdShedder",
        "placement": "LeastLongTermMessageRate",
        "split_algorithm": "range_equally_divide",
        "parameters": "{}",
        "is_shedding_enabled": True,
        "loop_interval_s": 10,
        **changes,
    }
    return BalancerConfigForm(data=data)


def test_config_form_accepts_known_names_and_keys_and_canonicalises_aliases(db):
    valid = form(
        shedder="threshold_shedder",
        parameters='{"loadBalancerBrokerThresholdShedderPercentage": 5}',
    )
    assert valid.is_valid(), valid.errors
    assert valid.cleaned_data["shedder"] == "ThresholdShedder"


def test_config_form_refuses_unknown_strategies_and_keys(db):
    bad = form(shedder="Nope", parameters='{"loadBalancerThresholdTypo": 5}')
    assert not bad.is_valid()
    assert "ThresholdShedder" in bad.errors["shedder"][0]
    assert bad.errors["parameters"][0].startswith(
        "loadBalancerThresholdTypo: unknown configuration key"
    )


def test_config_form_checks_each_parameter_against_its_range(db):
    bad = form(parameters='{"maxUnloadPercentage": 2, "loadBalancerSheddingIntervalMinutes": 1}')
    assert not bad.is_valid()
    assert bad.errors["parameters"] == [
        "maxUnloadPercentage must be at most 1 fraction"  # the key named once
    ]


def test_the_demo_operator_edits_the_config_in_the_console_not_the_admin(cluster, tmp_path, client):
    from console.services.seed import demo_operator_ensure

    username, password = demo_operator_ensure(tmp_path / "pw")
    assert demo_operator_ensure(tmp_path / "pw") == (username, password)  # idempotent
    response = client.post("/login/", {"username": username, "password": password})
    assert response.status_code == 302
    assert client.get("/config/").status_code == 200
    # The Django admin is for superusers only.
    assert client.get("/admin/console/balancerconfig/").status_code == 302
    assert client.get("/admin/").status_code == 302


def test_console_runs_danube_on_bundles_and_refuses_what_it_cannot_run(db):
    danube = form(shedder="danube", placement="fair", parameters='{"aggressiveness": "aggressive"}')
    assert danube.is_valid(), danube.errors
    bad = form(placement="AvgShedder", split_algorithm="flow_or_qps_equally_divide")
    assert not bad.is_valid()
    assert "LeastLongTermMessageRate" in bad.errors["placement"][0]
    assert "split_algorithm" not in bad.errors  # every split algorithm runs in the console
    assert "nope" in form(split_algorithm="nope").errors["split_algorithm"][0]


def test_loop_interval_must_be_positive(db):
    assert "loop_interval_s" in form(loop_interval_s=0).errors


def admin_client(client, cluster):
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", password="s3cret-pass")
    client.force_login(User.objects.get(username="root"))
    return client


def test_the_admin_cannot_set_a_broker_state_only_drain_it_through_the_service(cluster, client):
    from console.models import AuditEvent, Broker

    admin = admin_client(client, cluster)
    broker = Broker.objects.get(name="broker-1")
    # The state field is read-only: a posted "drained" is ignored.
    admin.post(
        f"/admin/console/broker/{broker.pk}/change/", {"state": "drained", "failure_domain": ""}
    )
    assert Broker.objects.get(pk=broker.pk).state == "active"
    response = admin.post(
        "/admin/console/broker/",
        {"action": "drain", "_selected_action": [broker.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert Broker.objects.get(pk=broker.pk).state in ("draining", "drained")
    assert AuditEvent.objects.filter(action="drain", actor__username="root").exists()


def test_a_config_change_in_the_admin_is_audited(cluster, client):
    from console.models import AuditEvent, BalancerConfig
    from console.selectors import balancer_config_get

    config = balancer_config_get()
    admin = admin_client(client, cluster)
    response = admin.post(
        f"/admin/console/balancerconfig/{config.pk}/change/",
        {
            "shedder": "AvgShedder",
            "placement": "LeastLongTermMessageRate",
            "split_algorithm": "range_equally_divide",
            "parameters": '{"maxUnloadPercentage": 0.2}',
            "is_shedding_enabled": "on",
            "loop_interval_s": 10,
        },
    )
    assert response.status_code == 302, response.content[:500]
    assert BalancerConfig.objects.get(pk=config.pk).shedder == "AvgShedder"
    event = AuditEvent.objects.get(action="config")
    assert event.actor.username == "root"
    assert "shedder: 'ThresholdShedder' → 'AvgShedder'" in event.reason
