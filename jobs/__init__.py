"""Table services as Spark jobs."""
