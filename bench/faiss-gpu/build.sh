#!/bin/bash
# Builds the Faiss GPU IVF-Flat peer (bench/faiss-gpu/README.md) on a Debian 12 build
# machine with CUDA 13 at $CUDA (default /usr/local/cuda):
#   1. fetches Debian bookworm's faiss source package (1.7.3-2) with apt-get's source
#      download through a private sources list and private apt state under
#      bench/.cache/apt-bookworm (the system's apt configuration is not touched), or, if
#      that fails, with curl + dpkg-source -x; into bench/.cache/src-faiss/
#   2. applies the build fixes CUDA 13 needs (below), idempotently
#   3. builds the static library libfaiss.a (GPU on, sm_90 only, Release, no Python, no
#      tests) in bench/.cache/faiss-build with `nice -n 10 make -j$JOBS faiss`
#   4. compiles faiss_gpu_bench.cpp and links it statically against libfaiss.a, the CUDA
#      runtime (libcudart_static.a), Debian's BLAS/LAPACK (reference libblas.a + liblapack.a,
#      or FAISS_GPU_BLAS=openblas for libopenblas.a; with libgfortran.a, libquadmath.a) and
#      libgomp.a, so the GPU host needs only libcublas.so.13 (+ the libcublasLt.so.13 beside
#      it) and the driver; rpath /usr/local/cuda/lib64; stripped, into .faissgpu/.
# Nothing fetched is ever committed: it all lands under bench/.cache/ (git-ignored) and
# .faissgpu/ (.git/info/exclude).  Idempotent: each step is skipped when done.
# Environment: JOBS (2), CUDA (/usr/local/cuda), FAISS_REBUILD=1 (library again),
# FAISS_GPU_RELINK=1 (driver again),
# FAISS_GPU_BLAS (reference | openblas), BENCH_DEBIAN_MIRROR, BENCH_DEBIAN_KEYRING.
# The library takes about 17 minutes on 2 cores; the driver seconds.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
cache=$here/bench/.cache
src=$cache/src-faiss
apt=$cache/apt-bookworm
bld=$cache/faiss-build
out=$here/.faissgpu
CUDA=${CUDA:-/usr/local/cuda}
JOBS=${JOBS:-2}
mirror=${BENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=${BENCH_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
version=1.7.3-2
sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log() { echo "faiss-gpu: $*" >&2; }

# ---- 0. tools and libraries ----
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v dpkg-source >/dev/null || need+=(dpkg-dev)
command -v g++ >/dev/null || need+=(g++)
command -v gfortran >/dev/null || [ -f "$(gcc -print-file-name=libgfortran.a)" ] || need+=(libgfortran-12-dev)
[ -f /usr/lib/x86_64-linux-gnu/blas/libblas.a ] || need+=(libblas-dev)
[ -f /usr/lib/x86_64-linux-gnu/lapack/liblapack.a ] || need+=(liblapack-dev)
[ "${FAISS_GPU_BLAS:-reference}" != openblas ] || [ -f /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a ] ||
	need+=(libopenblas-dev)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	sudo_if env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi
[ -x "$CUDA/bin/nvcc" ] || { log "no nvcc at $CUDA/bin/nvcc (set CUDA=)"; exit 1; }

# ---- 1. fetch ----
srcdir=$src/faiss-1.7.3
if [ ! -f "$srcdir/CMakeLists.txt" ]; then
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$src"
	echo "deb-src [signed-by=$keyring] $mirror bookworm main" >"$apt/sources.list"
	opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State=$apt" -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
		-o APT::Sandbox::User=root)
	log "fetching faiss's Debian source package from bookworm"
	if ! { apt-get "${opts[@]}" -qq update >&2 &&
		(cd "$src" && apt-get "${opts[@]}" -qq source "faiss=$version" >&2); }; then
		log "apt-get source failed; fetching the .dsc and tarballs with curl"
		for f in faiss_$version.dsc faiss_1.7.3.orig.tar.gz faiss_$version.debian.tar.xz; do
			curl -fsSL -o "$src/$f" "$mirror/pool/main/f/faiss/$f"
		done
		(cd "$src" && dpkg-source -x faiss_$version.dsc faiss-1.7.3 >&2)
	fi
	[ -f "$srcdir/CMakeLists.txt" ] || { log "no source tree at $srcdir"; exit 1; }
fi

# ---- 2. CUDA 13 build fixes (source tree under bench/.cache only) ----
# CUDA 13's Thrust/CUB/libcu++ (CCCL 3) refuse anything below C++17 ("Thrust requires at
# least C++17"), and Faiss 1.7.3 pins CMAKE_CXX_STANDARD 11, which CMake also applies to
# the .cu files.  Faiss 1.7.3 compiles as C++17 unchanged; nothing else was needed.
sed -i 's/^set(CMAKE_CXX_STANDARD 11)$/set(CMAKE_CXX_STANDARD 17)/' "$srcdir/CMakeLists.txt"
grep -q '^set(CMAKE_CXX_STANDARD 17)$' "$srcdir/CMakeLists.txt" || { log "C++17 patch did not apply"; exit 1; }

# ---- 3. libfaiss.a ----
lib=$bld/faiss/libfaiss.a
if [ ! -f "$lib" ] || [ "${FAISS_REBUILD:-0}" = 1 ]; then
	mkdir -p "$bld"
	# sm_90 SASS only ("90-real": the H100/H200 run it natively; no PTX to carry);
	# static library.  CMake only checks that a static BLAS/LAPACK exists (a static
	# library links none); the final link below picks it.
	(cd "$bld" && PATH=$CUDA/bin:$PATH cmake "$srcdir" \
		-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
		-DFAISS_ENABLE_GPU=ON -DFAISS_ENABLE_PYTHON=OFF -DFAISS_ENABLE_C_API=OFF -DBUILD_TESTING=OFF \
		-DCMAKE_CUDA_COMPILER="$CUDA/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES=90-real \
		-DBLA_STATIC=ON >&2)
	log "building libfaiss.a (nice -n 10 make -j$JOBS faiss; about 17 minutes on 2 cores)"
	t0=$(date +%s)
	(cd "$bld" && PATH=$CUDA/bin:$PATH nice -n 10 make -j"$JOBS" faiss >&2)
	log "libfaiss.a built in $(( $(date +%s) - t0 )) s"
fi

# ---- 4. the driver ----
mkdir -p "$out" "$cache/faiss-driver"
obj=$cache/faiss-driver/faiss_gpu_bench.o
bin=$out/faiss_gpu_bench
cpp=$here/bench/faiss-gpu/faiss_gpu_bench.cpp
if [ ! -x "$bin" ] || [ "${FAISS_GPU_RELINK:-0}" = 1 ] || [ "$cpp" -nt "$bin" ] || [ "$here/bench/store/synth.h" -nt "$bin" ] || [ "$lib" -nt "$bin" ]; then
	log "compiling and linking $bin"
	# no -march: the generator (synth.h) must round exactly as bench_store.run does
	g++ -std=c++17 -O2 -Wall -Wextra -isystem "$srcdir" -isystem "$CUDA/include" \
		-I "$here/bench/store" -c "$cpp" -o "$obj"
	# CPU BLAS/LAPACK: faiss's CPU objects that the GPU index pulls in reference sgemm_,
	# sgesvd_ & co., but no measured path calls them (k-means assigns with the GPU
	# quantizer, cuBLAS does the GPU's matrix work).  Default: Debian's reference
	# libblas.a + liblapack.a (binary ~17 MB); FAISS_GPU_BLAS=openblas links Debian's
	# libopenblas.a instead (~42 MB: its kernels for every x86 CPU come along).
	case ${FAISS_GPU_BLAS:-reference} in
	openblas) blas=("$(readlink -f /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a)") ;;
	reference) blas=(/usr/lib/x86_64-linux-gnu/lapack/liblapack.a /usr/lib/x86_64-linux-gnu/blas/libblas.a) ;;
	*) log "FAISS_GPU_BLAS: reference or openblas"; exit 1 ;;
	esac
	g++ -o "$bin" "$obj" "$lib" "$CUDA/lib64/libcudart_static.a" "${blas[@]}" \
		"$(gcc -print-file-name=libgfortran.a)" "$(gcc -print-file-name=libquadmath.a)" \
		"$(gcc -print-file-name=libgomp.a)" \
		-L"$CUDA/lib64" -lcublas -Wl,-rpath,/usr/local/cuda/lib64 -Wl,--as-needed \
		-lpthread -ldl -lrt -lm -s
fi
log "$bin: $(stat -c %s "$bin") bytes"
ldd "$bin" >&2 || true
echo "$bin"
