# What toolchain-arm64.cmake and toolchain-armhf.cmake share: a Debian
# multiarch cross build. The cross compiler (crossbuild-essential-ARCH)
# already searches /usr/lib/TRIPLET and /usr/include/TRIPLET, where the
# foreign -dev packages put their files, so there is no sysroot to name;
# pkg-config reads only the foreign architecture's .pc files. Set before
# including: CMAKE_SYSTEM_PROCESSOR, CDC_CROSS_TRIPLET, CDC_CROSS_QEMU.
#
# Or -DCDC_CROSS_SYSROOT=DIR: the target's packages extracted into DIR
# (tests/cross/sysroot.sh), for a machine where the multiarch ones cannot be
# installed; then DIR is the compiler's sysroot, pkg-config's and qemu's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${CDC_CROSS_TRIPLET}-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE ${CDC_CROSS_TRIPLET})
# try_compile projects read this file again: they get the sysroot too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CDC_CROSS_SYSROOT)

if(CDC_CROSS_SYSROOT)
  set(CMAKE_SYSROOT ${CDC_CROSS_SYSROOT})
  set(CDC_CROSS_LOADER_PREFIX ${CDC_CROSS_SYSROOT})
else()
  set(CDC_CROSS_LOADER_PREFIX /usr/${CDC_CROSS_TRIPLET})
endif()

# pkg-config: the target's .pc files and the architecture-independent ones,
# never the build machine's (whose Libs would name x86-64 libraries).
set(ENV{PKG_CONFIG_LIBDIR}
  "${CDC_CROSS_SYSROOT}/usr/lib/${CDC_CROSS_TRIPLET}/pkgconfig:${CDC_CROSS_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${CDC_CROSS_SYSROOT}")

# The target's programs run here under qemu-user (qemu-user-static), with
# the target's loader and libraries.
find_program(CDC_CROSS_QEMU_PATH ${CDC_CROSS_QEMU})
if(CDC_CROSS_QEMU_PATH)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CDC_CROSS_QEMU_PATH} -L ${CDC_CROSS_LOADER_PREFIX})
endif()

# Build-tree programs also look in /lib first. Under qemu-user with
# -L /usr/TRIPLET (the cross loader, libc6-ARCH-cross) that is the cross
# libc beside that loader; without it the loader takes the multiarch
# libc6:ARCH that the -dev packages installed, of another Debian revision,
# and the first pthread_create never returns. On a device /lib holds no
# libc.so.6 (it is in /lib/TRIPLET), and cmake --install drops build paths.
# A sysroot has its loader and libc of one revision: no such path.
if(NOT CDC_CROSS_SYSROOT)
  set(CMAKE_BUILD_RPATH /lib)
endif()
