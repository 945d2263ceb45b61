"""Table schemas: Avro (as Hudi writes them) and Arrow (as readers see them), and the codecs between."""
