-- gpuindex extension script (assembled from src/sql/*.sql by the Makefile)
\echo Use "CREATE EXTENSION gpuindex" to load this file. \quit
