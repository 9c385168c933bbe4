# Cross build for 32-bit ARM, hard float (Raspberry Pi 2/3/4 on a 32-bit OS:
# Raspberry Pi OS armhf, Debian armhf) with Debian's crossbuild-essential-armhf
# and the :armhf -dev packages of OpenBLAS, libzmq and CZMQ (docs/install.md):
#   cmake -S . -B build-armhf -DCMAKE_BUILD_TYPE=Release \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-armhf.cmake
# size_t, long and pointers are 32 bits there: the worker refuses a task it
# cannot address (docs/protocol.md, "32-bit workers").
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CDC_CROSS_TRIPLET arm-linux-gnueabihf)
set(CDC_CROSS_QEMU qemu-arm-static)
include(${CMAKE_CURRENT_LIST_DIR}/toolchain-debian-cross.cmake)
