# Sourced by gpu-run.sh and gpu-pqsweep.sh: faiss_gpu_env BIN FILE writes what the run
# ran on (date, host, cores, nvidia-smi, the binary and its libraries) to FILE.
faiss_gpu_env() {
	{
		date -u
		uname -a
		nproc
		nvidia-smi
		nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
		ls -l "$1"
		ldd "$1"
	} >"$2" 2>&1
}
