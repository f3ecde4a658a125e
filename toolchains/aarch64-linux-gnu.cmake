# Cross-compiling for 64-bit ARM Linux (Debian arm64) on a Debian 12 host.
#
# Target libraries come from Debian multiarch: `apt-get install libfoo-dev:arm64`
# puts them in /usr/lib/aarch64-linux-gnu (CMake package configs in
# /usr/lib/aarch64-linux-gnu/cmake, pkg-config files in .../pkgconfig) and the
# headers in /usr/include. scripts/setup-deps --cross aarch64 installs them.
# Tests run under qemu-user through CMAKE_CROSSCOMPILING_EMULATOR.
# docs/building.md explains each setting.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Where find_* look: the cross toolchain's own root, and "/" so that, with
# CMAKE_LIBRARY_ARCHITECTURE above, the multiarch dirs /usr/lib/aarch64-linux-gnu
# (libraries, package configs) and /usr/include are searched, plus the
# architecture-independent /usr/share/cmake and /usr/lib/cmake (nlohmann_json,
# doctest). Host libraries live in /usr/lib/x86_64-linux-gnu, which is never
# searched, so no host library can be picked up by mistake.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # build tools run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (libgpiod, and FindOpenSSL's hints) must see only target .pc files.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
unset(ENV{PKG_CONFIG_PATH})
unset(ENV{PKG_CONFIG_SYSROOT_DIR})

# ctest (and try_run) run target binaries under qemu-user. `-L /`: the ARM
# program loads Debian's multiarch loader and libc (/lib/aarch64-linux-gnu, pulled in
# by every :<arch> -dev package), exactly as on the board. Not
# `-L /usr/aarch64-linux-gnu`: that gives the cross toolchain's ld.so but still the
# multiarch libc.so.6 (the loader searches /lib/aarch64-linux-gnu first), and
# that mismatched pair makes Paho spin forever on a refused connect.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
