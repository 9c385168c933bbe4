# packaging.cmake - Debian packages with CPack (docs/install.md, "Debian packages").
#
#   cmake -S . -B B -DCMAKE_BUILD_TYPE=Release [-DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-ARCH.cmake]
#   cmake --build B && (cd B && cpack -G DEB)
#
# writes four packages into B, one per install component:
#   libcdcgemm0     the library (lib)
#   libcdcgemm-dev  headers, cdcgemm.pc, the CMake package, the .so link (dev)
#   cdcgemm-worker  the worker, the keygen, the systemd unit and its example
#                   environment file (worker)
#   cdcgemm-tools   cdcgemm-bench and cdcgemm-llm (tools)
# for the build's architecture: this machine's, or the toolchain file's when
# cross-compiling. Dependencies are declared here, not detected: the library
# loads OpenBLAS with dlopen (src/compute/blas_backend.c), which dpkg-shlibdeps
# cannot see, and a cross build has no dpkg-shlibdeps for its target. The
# versions are Debian 12's, the oldest this project is built and tested on.
# No maintainer scripts: the unit's DynamicUser makes its user when it starts,
# so installing creates no user, group or directory (tests/packages/deb_check.sh).

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cdcgemm)
set(CPACK_PACKAGE_VENDOR "cdcgemm developers")
set(CPACK_PACKAGE_CONTACT "cdcgemm developers <maintainers@users.noreply.a-seed-ea29dae3.example>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Install with DESTDIR: cdcgemm.pc and the unit, written at install time, name
# /usr, not CPack's staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev worker tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
# A shlibs file for the package that holds a shared library (libcdcgemm0):
# packages built against it depend on libcdcgemm0 (= this version) while the
# ABI of 0.x may change (docs/abi.md).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

if(CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^arm")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE armhf)
  else()
    message(STATUS "packaging: no Debian architecture for ${CMAKE_SYSTEM_PROCESSOR}; "
      "set CPACK_DEBIAN_PACKAGE_ARCHITECTURE")
  endif()
endif()

set(CDC_DEB_RUNTIME "libc6 (>= 2.34), libczmq4 (>= 4.2.1), libzmq5 (>= 4.3.4), libopenblas0")
set(CDC_DEB_SAME_VERSION "(= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libcdcgemm0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# The library's default (no CDCGEMM_WORKERS) spawns local cdcgemm-worker
# processes, found beside it (docs/workers.md): the worker is part of it.
# The ldconfig trigger Debian asks of a shared library's package (CPack's own
# postinst and postrm call ldconfig too, which lintian notes as a warning).
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/triggers)
set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS
  "${CDC_DEB_RUNTIME}, cdcgemm-worker ${CDC_DEB_SAME_VERSION}")
set(CPACK_DEBIAN_LIB_DESCRIPTION "coded distributed GEMM over ZeroMQ workers (library)
cdcgemm runs the fully-connected and convolution layers of neural networks,
and any cblas_sgemm/sgemm_ call, as GEMMs split across ZeroMQ workers, with
coded parity shards so a missing or straggling worker's result is rebuilt
locally instead of waited for.

This package holds the shared library, also usable as a drop-in BLAS with
LD_PRELOAD.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libcdcgemm-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# cdcgemm.pc names them in Requires.private, which pkg-config checks always.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libcdcgemm0 ${CDC_DEB_SAME_VERSION}, libzmq3-dev, libczmq-dev, libopenblas-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION "coded distributed GEMM over ZeroMQ workers (development files)
cdcgemm runs neural-network layers and GEMMs across ZeroMQ workers with coded
parity shards.

This package holds the headers, cdcgemm.pc and the CMake package
(find_package(cdcgemm), target cdcgemm::cdcgemm).")

set(CPACK_DEBIAN_WORKER_PACKAGE_NAME cdcgemm-worker)
set(CPACK_DEBIAN_WORKER_PACKAGE_SECTION net)
set(CPACK_DEBIAN_WORKER_PACKAGE_DEPENDS "${CDC_DEB_RUNTIME}")
set(CPACK_DEBIAN_WORKER_DESCRIPTION "coded distributed GEMM over ZeroMQ workers (worker)
cdcgemm runs neural-network layers and GEMMs across ZeroMQ workers with coded
parity shards.

This package holds cdcgemm-worker, the process a device runs to serve
coordinators (CURVE keys made by cdcgemm-keygen), and the systemd template
unit cdcgemm-worker@.service with its example environment file. Nothing is
enabled on installation (docs/deploy.md).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME cdcgemm-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
  "${CDC_DEB_RUNTIME}, cdcgemm-worker ${CDC_DEB_SAME_VERSION}")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "coded distributed GEMM over ZeroMQ workers (tools)
cdcgemm runs neural-network layers and GEMMs across ZeroMQ workers with coded
parity shards.

This package holds cdcgemm-bench (fault-injection benchmarks: crashes,
stragglers, slow devices and links; worker status and plan predictions) and
cdcgemm-llm (token generation with a Llama-architecture model whose weight
products run on the workers).")

# Debian wants copyright and changelog.gz (a native package's) in
# /usr/share/doc/PACKAGE of each; a plain cmake --install leaves them out.
set(CDC_DEB_DOC_BUILD ${PROJECT_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${CDC_DEB_DOC_BUILD})
string(TIMESTAMP CDC_DEB_DATE "%a, %d %b %Y 00:00:00 +0000" UTC)
file(WRITE ${CDC_DEB_DOC_BUILD}/changelog
  "cdcgemm (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
  "  * Release ${PROJECT_VERSION}: see docs/ and the project's history.\n\n"
  " -- ${CPACK_PACKAGE_CONTACT}  ${CDC_DEB_DATE}\n")
find_program(CDC_GZIP gzip)
if(CDC_GZIP)
  execute_process(COMMAND ${CDC_GZIP} -9nc ${CDC_DEB_DOC_BUILD}/changelog
    OUTPUT_FILE ${CDC_DEB_DOC_BUILD}/changelog.gz)
endif()
foreach(component lib dev worker tools)
  string(TOUPPER ${component} upper)
  set(doc_dir ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${upper}_PACKAGE_NAME})
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/copyright DESTINATION ${doc_dir}
    COMPONENT ${component} EXCLUDE_FROM_ALL)
  if(CDC_GZIP)
    install(FILES ${CDC_DEB_DOC_BUILD}/changelog.gz DESTINATION ${doc_dir}
      COMPONENT ${component} EXCLUDE_FROM_ALL)
  endif()
endforeach()

include(CPack)
