"""The load report as PySpark DataFrame -> DataFrame transforms over the Parquet history
(``console.services.history``: the ``brokers``, ``bundles`` and ``actions`` tables). No Django.

Run with spark-submit (``console/reports/submit.py`` builds the command):
``spark-submit console/reports/jobs.py --history DIR --output DIR [--options JSON]``.
Each result is written as JSON lines under ``<output>/<name>/``; progress goes to stdout as
``FULCRUM-PROGRESS <done>/<total> <stage>`` lines, read by the worker.

Units: usage as a fraction (0–1) where the column ends in ``usage``/``fraction``, CPU in percent
where it ends in ``percent``, rates in msg/s, throughput in bytes/s, times in UTC.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812  (PySpark's own convention)

PROGRESS = "FULCRUM-PROGRESS"
# The defaults of the options (Pulsar's split thresholds, the modular load manager's defaults).
OPTIONS: dict[str, float] = {
    "top": 50,  # hot bundles listed
    "maxMsgRate": 30_000.0,  # loadBalancerNamespaceBundleMaxMsgRate, msg/s
    "maxBandwidthBytes": 100 * 1024 * 1024,  # loadBalancerNamespaceBundleMaxBandwidthMbytes
    "maxTopics": 1000,  # loadBalancerNamespaceBundleMaxTopics
    "moveWindowS": 300,  # the load before and after a move is averaged over this many seconds
}


def progress(done: int, total: int, stage: str) -> None:
    """One progress line for the worker that runs the job."""
    print(f"{PROGRESS} {done}/{total} {stage}", flush=True)


def truncated(column: str, seconds: int) -> Column:
    """A timestamp column truncated to a multiple of ``seconds`` since the epoch (a UTC minute
    or hour): integer arithmetic, a third faster than ``date_trunc`` on 86 M rows."""
    return F.timestamp_seconds((F.col(column).cast("long") / seconds).cast("long") * seconds)


def with_hour(history: DataFrame) -> DataFrame:
    """Adds ``hour`` (the report's time truncated to the hour, UTC) and ``throughput_bytes_per_s``
    (in + out)."""
    return history.withColumn("hour", truncated("reported_at", 3600)).withColumn(
        "throughput_bytes_per_s",
        F.col("msg_throughput_in_bytes_per_s") + F.col("msg_throughput_out_bytes_per_s"),
    )


def nearest_rank(values: Column, p: float) -> Column:
    """The ``p`` percentile of a sorted array by nearest rank: its ``ceil(p × n)``-th value (null
    when empty), the value ``percentile_approx`` returns for a group it holds exactly."""
    n = F.size(values)
    return F.when(n > 0, F.element_at(values, F.ceil(F.lit(p) * n).cast("int")))


def broker_hours(brokers: DataFrame) -> DataFrame:
    """Per broker and hour: p50, p95 and max of CPU (percent) and throughput (bytes/s), and the
    number of reports. Percentiles are exact, by nearest rank (the ``ceil(p × n)``-th smallest
    value): what Spark's ``percentile_approx`` gives for a group of fewer than 10,000 reports."""
    # An hour's values collected and sorted: a broker reports ~120 times an hour, and the list
    # costs half the CPU of two percentile sketches per group (whose sort-based fallback spilled
    # gigabytes at 86 M rows).
    return (
        with_hour(brokers)
        .groupBy("broker", "hour")
        .agg(
            F.sort_array(F.collect_list("cpu_percent")).alias("cpu"),
            F.max("cpu_percent").alias("cpu_max"),
            F.sort_array(F.collect_list("throughput_bytes_per_s")).alias("throughput"),
            F.max("throughput_bytes_per_s").alias("throughput_max"),
            F.count(F.lit(1)).alias("reports"),
        )
        .select(
            "broker",
            "hour",
            nearest_rank(F.col("cpu"), 0.5).alias("cpu_p50"),
            nearest_rank(F.col("cpu"), 0.95).alias("cpu_p95"),
            "cpu_max",
            nearest_rank(F.col("throughput"), 0.5).alias("throughput_p50"),
            nearest_rank(F.col("throughput"), 0.95).alias("throughput_p95"),
            "throughput_max",
            "reports",
        )
        # Sorted in one partition (the result is written as one file): a global sort's range
        # partitioning would run the aggregation twice, once to sample it.
        .repartition(1)
        .orderBy("hour", "broker")
    )


def cluster_minutes(brokers: DataFrame) -> DataFrame:
    """Per minute: the coefficient of variation (population std / mean; 0 when the mean is 0)
    and the max/mean of the brokers' weighted usage (each broker's mean over its reports of
    that minute), and how many brokers reported."""
    per_broker = (
        brokers.withColumn("minute", truncated("reported_at", 60))
        .groupBy("minute", "broker")
        .agg(F.avg("weighted_usage_fraction").alias("usage"))
    )
    stats = per_broker.groupBy("minute").agg(
        F.avg("usage").alias("mean_usage"),
        F.stddev_pop("usage").alias("std_usage"),
        F.max("usage").alias("max_usage"),
        F.count(F.lit(1)).alias("brokers"),
    )
    positive = F.col("mean_usage") > 0
    return (
        stats.withColumn(
            "cv", F.when(positive, F.col("std_usage") / F.col("mean_usage")).otherwise(0.0)
        )
        .withColumn(
            "max_over_mean",
            F.when(positive, F.col("max_usage") / F.col("mean_usage")).otherwise(0.0),
        )
        .orderBy("minute")
    )


def hot_bundles(
    bundles: DataFrame, actions: DataFrame | None, options: dict[str, float]
) -> DataFrame:
    """The hottest bundles: the ``top`` by p95 throughput (in + out, bytes/s) and the ``top`` by
    p95 message rate (in + out, msg/s), each with its mean and max, its most topics, its owner
    at its last sample, how often it moved (unloads) and was split, and whether it is a split
    candidate: a p95 or a topic count above Pulsar's split thresholds (``maxMsgRate`` msg/s,
    ``maxBandwidthBytes`` bytes/s, ``maxTopics``), with which."""
    samples = bundles.withColumn(
        "throughput",
        F.col("msg_throughput_in_bytes_per_s") + F.col("msg_throughput_out_bytes_per_s"),
    ).withColumn("msg_rate", F.col("msg_rate_in") + F.col("msg_rate_out"))
    stats = samples.groupBy("bundle", "namespace").agg(
        F.count(F.lit(1)).alias("samples"),
        F.percentile_approx("throughput", 0.95).alias("throughput_p95"),
        F.avg("throughput").alias("throughput_mean"),
        F.max("throughput").alias("throughput_max"),
        F.percentile_approx("msg_rate", 0.95).alias("msg_rate_p95"),
        F.avg("msg_rate").alias("msg_rate_mean"),
        F.max("msg_rate").alias("msg_rate_max"),
        F.max("topics").alias("topics"),
        F.max_by("owner", "at").alias("owner"),
    )
    if actions is not None:
        counts = actions.groupBy(F.col("target").alias("bundle")).agg(
            F.sum(F.when(F.col("action") == "unload", 1).otherwise(0)).alias("moves"),
            F.sum(F.when(F.col("action") == "split", 1).otherwise(0)).alias("splits"),
        )
        stats = stats.join(counts, "bundle", "left")
    else:
        stats = stats.withColumn("moves", F.lit(0)).withColumn("splits", F.lit(0))
    stats = stats.fillna(0, ["moves", "splits"])
    over = [
        F.when(F.col("msg_rate_p95") > options["maxMsgRate"], F.lit("msg rate")),
        F.when(F.col("throughput_p95") > options["maxBandwidthBytes"], F.lit("throughput")),
        F.when(F.col("topics") > options["maxTopics"], F.lit("topics")),
    ]
    stats = stats.withColumn("split_reasons", F.concat_ws(", ", *over)).withColumn(
        "split_candidate", F.col("split_reasons") != ""
    )
    by_throughput = Window.orderBy(F.col("throughput_p95").desc(), F.col("bundle"))
    by_msg_rate = Window.orderBy(F.col("msg_rate_p95").desc(), F.col("bundle"))
    top = int(options["top"])
    return (
        stats.withColumn("throughput_rank", F.row_number().over(by_throughput))
        .withColumn("msg_rate_rank", F.row_number().over(by_msg_rate))
        .filter((F.col("throughput_rank") <= top) | (F.col("msg_rate_rank") <= top))
        .orderBy("throughput_rank")
    )


def move_effects(actions: DataFrame, brokers: DataFrame, window_s: float) -> DataFrame:
    """Each applied move (an unload with a source and a destination) with the weighted usage
    (fraction) of its source and its destination, each their mean over the ``window_s`` seconds
    before the move and over the ``window_s`` after; ``peak_before``/``peak_after`` the higher
    of the two, ``gain`` = peak before − peak after, and ``helped``: the gain is positive. A
    side without reports in a window is null (and so is the gain)."""
    moves = actions.filter(
        (F.col("action") == "unload") & (F.col("source") != "") & (F.col("destination") != "")
    ).select(
        F.col("id"),
        F.col("at"),
        F.col("target").alias("bundle"),
        F.col("source"),
        F.col("destination"),
    )
    seconds = F.col("reported_at").cast("double") - F.col("at").cast("double")
    reports = brokers.select("broker", "reported_at", "weighted_usage_fraction")

    def side(column: str) -> DataFrame:
        joined = moves.join(
            reports, (reports.broker == moves[column]) & (F.abs(seconds) <= window_s)
        )
        return joined.groupBy("id").agg(
            F.avg(F.when(seconds < 0, F.col("weighted_usage_fraction"))).alias(f"{column}_before"),
            F.avg(F.when(seconds > 0, F.col("weighted_usage_fraction"))).alias(f"{column}_after"),
        )

    out = moves.join(side("source"), "id", "left").join(side("destination"), "id", "left")
    out = out.withColumn(
        "peak_before", F.greatest("source_before", "destination_before")
    ).withColumn("peak_after", F.greatest("source_after", "destination_after"))
    both = (
        F.col("source_before").isNotNull()
        & F.col("destination_before").isNotNull()
        & F.col("source_after").isNotNull()
        & F.col("destination_after").isNotNull()
    )
    gain = F.when(both, F.col("peak_before") - F.col("peak_after"))
    return out.withColumn("gain", gain).withColumn("helped", gain > 0).orderBy("at", "id")


def namespace_hours(bundles: DataFrame) -> DataFrame:
    """Per namespace and hour: the mean and max over the samples of the namespace's total
    message rate (in + out, msg/s) and throughput (in + out, bytes/s), and its bundles."""
    per_sample = bundles.groupBy("namespace", "at").agg(
        F.sum(F.col("msg_rate_in") + F.col("msg_rate_out")).alias("msg_rate"),
        F.sum(
            F.col("msg_throughput_in_bytes_per_s") + F.col("msg_throughput_out_bytes_per_s")
        ).alias("throughput"),
        F.count(F.lit(1)).alias("bundles"),
    )
    return (
        per_sample.withColumn("hour", truncated("at", 3600))
        .groupBy("namespace", "hour")
        .agg(
            F.avg("msg_rate").alias("msg_rate_mean"),
            F.max("msg_rate").alias("msg_rate_max"),
            F.avg("throughput").alias("throughput_mean"),
            F.max("throughput").alias("throughput_max"),
            F.max("bundles").alias("bundles"),
        )
        .orderBy("hour", "namespace")
    )


def _table(spark: SparkSession, history: str, name: str) -> DataFrame | None:
    path = Path(history) / name
    if not any(path.glob("date=*/*.parquet")):
        return None
    return spark.read.parquet(str(path))


def _write(frame: DataFrame, output: str, name: str) -> None:
    times = [f.name for f in frame.schema.fields if f.dataType.typeName() == "timestamp"]
    for column in times:
        frame = frame.withColumn(column, F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss'Z'"))
    frame.coalesce(1).write.mode("overwrite").json(f"{output}/{name}")


def run(spark: SparkSession, history: str, output: str, options: dict[str, Any]) -> dict[str, Any]:
    """Read the history's tables, write each result under ``output``; returns what was written
    (``{"written": [names], "missing": {name: why}}``, also saved as ``output/summary.json``)."""
    opts = {**OPTIONS, **options}
    brokers = _table(spark, history, "brokers")
    bundles = _table(spark, history, "bundles")
    actions = _table(spark, history, "actions")
    stages: list[tuple[str, Callable[[], DataFrame] | None, str]] = [
        ("broker_hours", (lambda: broker_hours(brokers)) if brokers else None, "no load reports"),
        (
            "cluster_minutes",
            (lambda: cluster_minutes(brokers)) if brokers else None,
            "no load reports",
        ),
        (
            "hot_bundles",
            (lambda: hot_bundles(bundles, actions, opts)) if bundles else None,
            "no bundle samples",
        ),
        (
            "move_effects",
            (lambda: move_effects(actions, brokers, float(opts["moveWindowS"])))
            if actions and brokers
            else None,
            "no moves or no load reports",
        ),
        (
            "namespace_hours",
            (lambda: namespace_hours(bundles)) if bundles else None,
            "no bundle samples",
        ),
    ]
    summary: dict[str, Any] = {"written": [], "missing": {}}
    progress(0, len(stages), "reading the history")
    for done, (name, build, why) in enumerate(stages, 1):
        if build is None:
            summary["missing"][name] = why
        else:
            _write(build(), output, name)
            summary["written"].append(name)
        progress(done, len(stages), name)
    Path(output).mkdir(parents=True, exist_ok=True)
    (Path(output) / "summary.json").write_text(json.dumps(summary))
    return summary


# The report's session settings (spark-submit's jobs and tests/benchmarks/spark_history.py):
# UTC; 32 shuffle partitions, which adaptive execution coalesces into ~16 MB ones (one when the
# data is small). 4 left 11 M broker-minutes a task at 86 M rows: gigabytes spilled.
SESSION_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "32",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16m",
    "spark.sql.session.timeZone": "UTC",
}


def session(app: str) -> SparkSession:
    """A session for a Fulcrum job: ``SESSION_CONF``, no UI."""
    builder = SparkSession.builder.appName(app)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def main() -> None:
    """Entry point for spark-submit."""
    parser = argparse.ArgumentParser(description="Fulcrum historical load report")
    parser.add_argument("--history", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--options", default="{}", help="JSON: " + ", ".join(OPTIONS))
    args = parser.parse_args()
    spark = session("fulcrum-load-report")
    try:
        run(spark, args.history, args.output, json.loads(args.options))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
