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
        "maxUnloadPercentage: maxUnloadPercentage must be at most 1 fraction"
    ]


def test_demo_operator_can_edit_the_config_in_the_admin(db, tmp_path, client):
    from console.services.seed import demo_operator_ensure

    username, password = demo_operator_ensure(tmp_path / "pw")
    assert demo_operator_ensure(tmp_path / "pw") == (username, password)  # idempotent
    response = client.post("/login/", {"username": username, "password": password})
    assert response.status_code == 302
    assert client.get("/admin/console/balancerconfig/").status_code == 200
    assert client.get("/admin/console/decision/").status_code == 403


def test_console_runs_danube_on_bundles_and_refuses_what_it_cannot_run(db):
    danube = form(shedder="danube", placement="fair", parameters='{"aggressiveness": "aggressive"}')
    assert danube.is_valid(), danube.errors
    bad = form(placement="AvgShedder", split_algorithm="flow_or_qps_equally_divide")
    assert not bad.is_valid()
    assert "LeastLongTermMessageRate" in bad.errors["placement"][0]
    assert "per-topic hashes" in bad.errors["split_algorithm"][0]


def test_loop_interval_must_be_positive(db):
    assert "loop_interval_s" in form(loop_interval_s=0).errors
