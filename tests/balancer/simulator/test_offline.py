"""The offline simulator's command line (``python -m balancer.simulator.offline``): a JSON line
per run, with and without shedding."""

import json
import runpy
import sys

import pytest


@pytest.mark.filterwarnings("ignore:'balancer.simulator.offline' found in sys.modules")
def test_offline_command_line_prints_a_comparison(capsys):
    from balancer.simulator.offline import main as offline_main

    offline_main(
        ["--minutes", "3", "--compare", "--config", '{"loadBalancerSheddingGracePeriodMinutes": 1}']
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["shedder"] for line in lines] == ["ThresholdShedder", "none"]
    assert all("cvAtMinute10" in line for line in lines)
    sys_argv = sys.argv
    try:
        sys.argv = ["offline", "--minutes", "2"]
        runpy.run_module("balancer.simulator.offline", run_name="__main__")
    finally:
        sys.argv = sys_argv
    assert json.loads(capsys.readouterr().out)["minutes"] == 2
