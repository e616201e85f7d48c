# gpuindex: PGXS build.  `make` builds gpuindex.so (host backend included)
# and, when nvcc is found, gpuindex_cuda.so (the CUDA backend the device
# service dlopens).  `make GPUINDEX_CUDA=0` skips CUDA entirely.

EXTENSION = gpuindex
EXTVERSION = 0.1.0

MODULE_big = gpuindex
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/types/*.c src/access/*.c src/service/*.c src/service/kinds/*.c src/backend/host/*.c src/am/*/*.c)))

# the extension script is assembled from per-topic fragments in src/sql/
DATA_built = gpuindex--$(EXTVERSION).sql
EXTRA_CLEAN = gpuindex--$(EXTVERSION).sql gpuindex_cuda.so test/unit/*.run

PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/src/types -I$(srcdir)/src/backend \
	-I$(srcdir)/src/backend/host -I$(srcdir)/src/access -I$(srcdir)/src/service \
	-I$(srcdir)/src/service/kinds -I$(srcdir)/src/am/gpuivf -I$(srcdir)/src/am/gpusparse \
	-I$(srcdir)/src/am/genie \
	-I$(srcdir)/cuda/common
PG_CFLAGS = -std=gnu99 -Wall -Wmissing-prototypes
SHLIB_LINK = -ldl -lm -lpthread

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

gpuindex--$(EXTVERSION).sql: $(sort $(wildcard src/sql/*.sql))
	cat $^ > $@

# PGXS tracks no header dependencies (Debian's server is built without
# --enable-depend): every object is rebuilt when any header changes, so a
# build after an update never mixes struct layouts
GI_HEADERS = $(wildcard src/*.h src/*/*.h src/*/*/*.h cuda/common/gi_cuda_test.h)
$(OBJS) $(OBJS:.o=.bc): $(GI_HEADERS)

# ---- CUDA backend -------------------------------------------------------
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
GPUINDEX_CUDA ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# sm_90 machine code for H100/H200 plus compute_90 PTX for newer parts
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90
NVCC_FLAGS ?= -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -fPIC,-Wall -I$(srcdir)/src/backend -I$(srcdir)/cuda/common
CU_SRCS = $(sort $(wildcard cuda/*/*.cu))
CU_OBJS = $(CU_SRCS:.cu=.o)
CU_HDRS = $(wildcard cuda/*/*.cuh cuda/*/*.h) $(wildcard src/backend/*.h)
EXTRA_CLEAN += cuda/*/*.o

ifeq ($(GPUINDEX_CUDA),1)
all: gpuindex_cuda.so
install: install-cuda

# one object per file (parallel make), linked into the module the service dlopens
cuda/%.o: cuda/%.cu $(CU_HDRS)
	$(NVCC) $(NVCC_FLAGS) -c -o $@ $<

gpuindex_cuda.so: $(CU_OBJS)
	$(NVCC) $(NVCC_FLAGS) -shared -cudart static -o $@ $(CU_OBJS) \
		-L$(CUDA_HOME)/lib64 -lcublas -Xlinker -rpath=$(CUDA_HOME)/lib64

install-cuda: gpuindex_cuda.so
	$(INSTALL_SHLIB) gpuindex_cuda.so '$(DESTDIR)$(pkglibdir)/'
endif

.PHONY: install-cuda unittest
# ---- C unit tests of the store (cmocka, no server needed) ---------------
unittest:
	$(MAKE) -C test/unit run
