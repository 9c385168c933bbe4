# Cross build for 64-bit ARM (Raspberry Pi 4/5 on a 64-bit OS) with Debian's
# crossbuild-essential-arm64 and the :arm64 -dev packages of OpenBLAS, libzmq
# and CZMQ (docs/install.md, "Cross builds for ARM devices"):
#   cmake -S . -B build-arm64 -DCMAKE_BUILD_TYPE=Release \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm64.cmake
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CDC_CROSS_TRIPLET aarch64-linux-gnu)
set(CDC_CROSS_QEMU qemu-aarch64-static)
include(${CMAKE_CURRENT_LIST_DIR}/toolchain-debian-cross.cmake)
