"""gpuindex end-to-end benchmark harness (issue 5): SQL engines (gpuivf, pgvector
IVFFlat/HNSW) and no-database references (Faiss, cuVS) on the same vectors."""
