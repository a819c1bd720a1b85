#!/bin/bash
# mixtool.sh: on the development machine (Debian 12, nvcc 11.8), a toolchain that builds the CUDA library with wgmma:
# nvcc 11.8's front end (cicc: the persistent kernel's code as fast as the libraries measured since the eighth session;
# nvcc 12.4's front end makes it 4-8% slower, bench/logs/issue15-round97-102/) and ptxas 12.4 (Debian trixie's
# nvidia-cuda-toolkit, extracted to /opt/c124, not installed), through a wrapper that assembles the PTX for sm_90a.
# Then, from the repository root:
#   MIX_90A=1 make cuda NVCC=/opt/mix/bin/nvcc CUDA_ARCH=-gencode=arch=compute_90,code=sm_90 CUDA_FLAGS=-DRLM_WG_FORCE
# (sm_90a code in an sm_90 cubin: H100 and H200 only; -DRLM_WG_FORCE turns on the wgmma product of branch i15-wg2,
# which nvcc 11.8's front end does not know as sm_90a; MIX_90A unset: plain sm_90). About 8 minutes on 2 cores.
set -euo pipefail
if [ ! -x /opt/c124/usr/bin/ptxas ]; then
  A=$(mktemp -d); trap 'rm -rf "$A"' EXIT
  mkdir -p "$A"/lists/partial "$A"/cache/archives/partial
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main contrib non-free" > "$A"/sources.list
  O="-o Dir::Etc::sourcelist=$A/sources.list -o Dir::Etc::sourceparts=/dev/null -o Dir::State::Lists=$A/lists -o Dir::Cache=$A/cache"
  apt-get $O update -qq
  (cd "$A" && apt-get $O download nvidia-cuda-toolkit)
  mkdir -p /opt/c124 && dpkg-deb -x "$A"/nvidia-cuda-toolkit_*.deb /opt/c124
fi
/opt/c124/usr/bin/ptxas --version | tail -1
mkdir -p /opt/mix/bin && cd /opt/mix/bin
cp /usr/lib/nvidia-cuda-toolkit/bin/nvcc nvcc.new && mv -f nvcc.new nvcc
for f in cicc crt g++ gcc; do ln -sf /usr/lib/nvidia-cuda-toolkit/bin/$f $f; done
cat > nvcc.profile <<'P'
NVVMIR_LIBRARY_DIR = /usr/lib/nvidia-cuda-toolkit/libdevice
PATH		+= /opt/mix/bin:/usr/lib/nvidia-cuda-toolkit/bin:
LIBRARIES	=+ $(_SPACE_) -L/usr/lib/x86_64-linux-gnu/stubs -L/usr/lib/x86_64-linux-gnu
P
cat > ptxas <<'W'
#!/bin/bash
# ptxas 12.4 under nvcc 11.8; with MIX_90A=1 the PTX (ISA 7.8, sm_90) is relabelled ISA 8.4, sm_90a, so that wgmma assembles.
args=()
for a in "$@"; do
  if [[ "${MIX_90A:-0}" == 1 ]]; then
    if [[ "$a" == *.ptx && -f "$a" ]]; then sed -i -E 's/^\.version [0-9.]+/.version 8.4/; s/^\.target sm_90$/.target sm_90a/' "$a"; fi
    if [[ "$a" == -arch=sm_90 ]]; then a=-arch=sm_90a; fi
    if [[ "$a" == sm_90 ]]; then a=sm_90a; fi
  fi
  args+=("$a")
done
exec /opt/c124/usr/bin/ptxas "${args[@]}"
W
chmod +x ptxas
echo "/opt/mix/bin/nvcc: nvcc 11.8 with ptxas 12.4"
