"""The PySpark job: DataFrame -> DataFrame transforms over the load history. No Django here.

Run with spark-submit (``console/reports/submit.py`` builds the command):
``spark-submit console/reports/jobs.py --history DIR --output DIR``.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812  (PySpark's own convention)


def with_hour(history: DataFrame) -> DataFrame:
    """Adds ``hour`` (the report's time truncated to the hour, UTC) and ``throughput_bytes_per_s``
    (in + out)."""
    return history.withColumn("hour", F.date_trunc("hour", F.col("reported_at"))).withColumn(
        "throughput_bytes_per_s",
        F.col("msg_throughput_in_bytes_per_s") + F.col("msg_throughput_out_bytes_per_s"),
    )


def broker_hours(history: DataFrame) -> DataFrame:
    """Per broker and hour: p50, p95 and max of CPU (percent) and throughput (bytes/s), and the
    number of reports. Percentiles are Spark's ``percentile_approx`` (exact for small groups)."""
    return (
        with_hour(history)
        .groupBy("broker", "hour")
        .agg(
            F.percentile_approx("cpu_percent", 0.5).alias("cpu_p50"),
            F.percentile_approx("cpu_percent", 0.95).alias("cpu_p95"),
            F.max("cpu_percent").alias("cpu_max"),
            F.percentile_approx("throughput_bytes_per_s", 0.5).alias("throughput_p50"),
            F.percentile_approx("throughput_bytes_per_s", 0.95).alias("throughput_p95"),
            F.max("throughput_bytes_per_s").alias("throughput_max"),
            F.count(F.lit(1)).alias("reports"),
        )
        .orderBy("hour", "broker")
    )


def cluster_hours(history: DataFrame) -> DataFrame:
    """Per hour: the coefficient of variation of the brokers' mean weighted usage in that hour
    (population std / mean, 0 when the mean is 0), and how many brokers reported."""
    per_broker = (
        with_hour(history)
        .groupBy("hour", "broker")
        .agg(F.avg("weighted_usage_fraction").alias("usage"))
    )
    stats = per_broker.groupBy("hour").agg(
        F.avg("usage").alias("mean_usage"),
        F.stddev_pop("usage").alias("std_usage"),
        F.count(F.lit(1)).alias("brokers"),
    )
    return stats.withColumn(
        "cv",
        F.when(F.col("mean_usage") > 0, F.col("std_usage") / F.col("mean_usage")).otherwise(
            F.lit(0.0)
        ),
    ).orderBy("hour")


def run(spark: SparkSession, history_dir: str, output_dir: str) -> None:
    """Read the Parquet history, write both results as single JSON-lines files."""
    history = spark.read.parquet(history_dir)
    for name, frame in (
        ("broker_hours", broker_hours(history)),
        ("cluster_hours", cluster_hours(history)),
    ):
        frame.withColumn("hour", F.date_format("hour", "yyyy-MM-dd'T'HH:mm:ss'Z'")).coalesce(
            1
        ).write.mode("overwrite").json(f"{output_dir}/{name}")


def main() -> None:
    """Entry point for spark-submit."""
    parser = argparse.ArgumentParser(description="Fulcrum historical load report")
    parser.add_argument("--history", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    spark = (
        SparkSession.builder.appName("fulcrum-load-report")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        run(spark, args.history, args.output)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
