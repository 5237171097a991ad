from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.load import BrokerLoad, BundleLoad, MessageRates
from balancer.shedding.uniform import java_int, shed
from balancer.snapshot import ClusterSnapshot

CONFIG = PulsarConfig()


def cluster(a_bundles, a_rate, b_rate, *, a_tput=0.0, b_tput=0.0, by="rate", recent=None):
    """Broker a owns ``a_bundles`` (name -> short-term rate or throughput); b owns one bundle."""

    def rates(value):
        return MessageRates(value, 0, 0, 0) if by == "rate" else MessageRates(0, 0, value, 0)

    bundles = {n: BundleLoad(n, "a", short_term=rates(v)) for n, v in a_bundles.items()}
    bundles["ns/b"] = BundleLoad("ns/b", "b", short_term=rates(1))
    brokers = {
        "a": BrokerLoad("a", rates=MessageRates(a_rate, 0, a_tput, 0), bundles=tuple(a_bundles)),
        "b": BrokerLoad("b", rates=MessageRates(b_rate, 0, b_tput, 0), bundles=("ns/b",)),
    }
    return ClusterSnapshot(1000.0, brokers, bundles, recently_unloaded=recent or {})


def test_rate_branch_takes_bundles_that_fit_the_required_rate_plus_slack():
    # diff 8000 msg/s = 400 % > 50 %; required int(8000 × 0.2) = 1600; 4500 and 3000 exceed
    # 1600 + 1000 and are passed over, 2500 fits (remaining -900), 500 exceeds 100, 50 fits.
    snap = cluster({"ns/1": 3000, "ns/2": 2500, "ns/3": 4500, "ns/4": 500, "ns/5": 50}, 10000, 2000)
    decision = shed(snap, CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/2", "ns/5"]
    assert decision.reason == Reason.LOAD_IMBALANCE
    assert decision.stats["required"] == 1600


def test_subtraction_is_truncated_to_int_like_pulsars_mutable_int():
    # required 1600 - int(2500.9) = -900: then 100.5 ≤ 100 + ... no: -900 + 1000 = 100 < 100.5.
    snap = cluster({"ns/1": 2500.9, "ns/2": 100.5, "ns/3": 100.0}, 10000, 2000)
    assert [u.bundle for u in shed(snap, CONFIG, {}).unloads] == ["ns/1", "ns/3"]


def test_required_below_min_unload_message_does_nothing():
    # diff 4000 = 100 % > 50 %, required 800 < 1000.
    snap = cluster({"ns/1": 500, "ns/2": 300}, 8000, 4000)
    assert shed(snap, CONFIG, {}).unloads == ()


def test_rate_branch_takes_precedence_even_when_it_does_nothing():
    snap = cluster({"ns/1": 500, "ns/2": 300}, 8000, 4000, a_tput=100 * 2**20, b_tput=1)
    assert shed(snap, CONFIG, {}).unloads == ()


def test_throughput_branch_when_rates_are_even():
    mib = 2**20
    snap = cluster(
        {"ns/1": 30 * mib, "ns/2": 10 * mib},
        1000,
        1000,
        a_tput=100 * mib,
        b_tput=10 * mib,
        by="tput",
    )
    # ratio 10 > 4; required int(90 MiB × 0.2) = 18 MiB: 30 MiB passes over, 10 MiB fits.
    decision = shed(snap, CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/2"]


def test_a_zero_minimum_counts_as_one():
    snap = cluster({"ns/1": 900, "ns/2": 900}, 6000, 0)
    decision = shed(snap, CONFIG, {})
    assert decision.stats["minMsgRate"] == 1.0
    assert decision.stats["required"] == java_int(5999 * 0.2)


def test_max_unload_bundle_num_caps_the_selection():
    config = PulsarConfig.from_keys({"maxUnloadBundleNumPerShedding": 1, "minUnloadMessage": 0})
    snap = cluster({"ns/1": 100, "ns/2": 100, "ns/3": 100}, 10000, 2000)
    assert len(shed(snap, config, {}).unloads) == 1


def test_single_bundle_broker_and_grace_period_are_respected():
    assert shed(cluster({"ns/1": 2000}, 10000, 2000), CONFIG, {}).unloads == ()
    snap = cluster({"ns/1": 2500, "ns/2": 2400}, 10000, 2000, recent={"ns/1": 990.0})
    decision = shed(snap, CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/2"]
    assert decision.skipped[0].reason == Reason.COOL_DOWN


def test_java_int_saturates_and_truncates():
    assert java_int(2.0**40) == 2**31 - 1
    assert java_int(-(2.0**40)) == -(2**31)
    assert java_int(-2.7) == -2
    assert java_int(float("nan")) == 0
