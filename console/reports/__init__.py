"""Historical load reports built by Spark from the Parquet load history."""
