#!/usr/bin/env bash
# sysroot.sh - a sysroot for cross-building cdcgemm, made of Debian's packages for ARCH
# extracted (never installed): the C library, and OpenBLAS, libzmq and CZMQ with
# their -dev files and everything they need at run time (docs/install.md).
#
# usage: sysroot.sh ARCH DIR        (ARCH: arm64 or armhf)
#
# For when the multiarch -dev packages cannot be installed: libczmq-dev:ARCH
# removes the native libczmq-dev, and every Multi-Arch: same package must be of
# the very version of its native twin, which a foreign index out of step with
# the native one (a mirror still syncing, a security update not yet built for
# ARCH) cannot give. Extracted, any version serves. Needs dpkg --add-architecture
# ARCH and an apt-get update that fetched ARCH's main index; no root otherwise.
# Then: cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-ARCH.cmake -DCDC_CROSS_SYSROOT=DIR,
# and run its programs with qemu-ARCH-static -L DIR. Exit 0, or 1 naming what failed.
set -eu
arch=${1:?usage: sysroot.sh ARCH DIR} dir=${2:?usage: sysroot.sh ARCH DIR}
case $arch in arm64|armhf) ;; *) echo "sysroot.sh: unknown ARCH '$arch'" >&2; exit 1 ;; esac
roots=(libc6-dev libopenblas-dev libopenblas0-pthread libzmq3-dev libczmq-dev)
mkdir -p "$dir/.debs"
# The closure of what the roots depend on (not recommends), this architecture's
# packages only; OpenBLAS's other flavours and elogind (alternatives to what is
# taken) left out.
packages=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${roots[@]/%/:$arch}" 2>/dev/null |
  grep "^[a-z0-9].*:$arch\$" | grep -v -e openmp -e serial -e elogind | sort -u)
[ -n "$packages" ] || { echo "sysroot.sh: no $arch packages known to apt" \
  "(dpkg --add-architecture $arch && apt-get update)" >&2; exit 1; }
(cd "$dir/.debs" && apt-get download $packages >download.log 2>&1) ||
  { tail -n 5 "$dir/.debs/download.log" >&2; echo "sysroot.sh: apt-get download failed" >&2; exit 1; }
for deb in "$dir"/.debs/*.deb; do dpkg-deb -x "$deb" "$dir"; done
# Absolute symbolic links (libfoo.so -> /lib/TRIPLET/libfoo.so.1) would leave
# the sysroot: made relative to it.
find "$dir" -type l -lname '/*' | while read -r link; do
  target=$(readlink "$link")
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir$target")" "$link"
done
# What OpenBLAS's maintainer scripts would make (update-alternatives): its
# pthread flavour as the libopenblas, openblas.pc and cblas.h of TRIPLET.
t=$(case $arch in arm64) echo aarch64-linux-gnu ;; armhf) echo arm-linux-gnueabihf ;; esac)
mkdir -p "$dir/usr/lib/$t/pkgconfig"
ln -sfn openblas-pthread/libopenblas.so.0 "$dir/usr/lib/$t/libopenblas.so.0"
ln -sfn openblas-pthread/libopenblas.so "$dir/usr/lib/$t/libopenblas.so"
ln -sfn ../openblas-pthread/pkgconfig/openblas.pc "$dir/usr/lib/$t/pkgconfig/openblas.pc"
for h in cblas.h f77blas.h openblas_config.h; do
  ln -sfn "openblas-pthread/$h" "$dir/usr/include/$t/$h"
done
echo "sysroot.sh: $(echo "$packages" | wc -w) $arch packages in $dir"
