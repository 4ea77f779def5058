"""Record memory: the harness's RecordStore contract, the record format, embedders, BM25 and ranking."""
