"""Table configuration: ``hoodie.properties`` and Hudi's typed config keys."""
