# What toolchain-arm64.cmake and toolchain-armhf.cmake share: a Debian
# multiarch cross build. The cross compiler (crossbuild-essential-ARCH)
# already searches /usr/lib/TRIPLET and /usr/include/TRIPLET, where the
# foreign -dev packages put their files, so there is no sysroot to name;
# pkg-config reads only the foreign architecture's .pc files. Set before
# including: CMAKE_SYSTEM_PROCESSOR, CDC_CROSS_TRIPLET, CDC_CROSS_QEMU.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${CDC_CROSS_TRIPLET}-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE ${CDC_CROSS_TRIPLET})

# pkg-config: the foreign .pc files and the architecture-independent ones,
# never the build machine's (whose Libs would name x86-64 libraries).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${CDC_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# The target's programs run here under qemu-user (qemu-user-static), with
# the foreign loader and libraries of the multiarch tree.
find_program(CDC_CROSS_QEMU_PATH ${CDC_CROSS_QEMU})
if(CDC_CROSS_QEMU_PATH)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CDC_CROSS_QEMU_PATH} -L /usr/${CDC_CROSS_TRIPLET})
endif()

# Build-tree programs also look in /lib first. Under qemu-user with
# -L /usr/TRIPLET (the cross loader, libc6-ARCH-cross) that is the cross
# libc beside that loader; without it the loader takes the multiarch
# libc6:ARCH that the -dev packages installed, of another Debian revision,
# and the first pthread_create never returns. On a device /lib holds no
# libc.so.6 (it is in /lib/TRIPLET), and cmake --install drops build paths.
set(CMAKE_BUILD_RPATH /lib)
