# Cross-compiling for 32-bit ARM hard-float Linux (Debian armhf) on a Debian 12 host.
#
# Target libraries come from Debian multiarch: `apt-get install libfoo-dev:armhf`
# puts them in /usr/lib/arm-linux-gnueabihf (CMake package configs in
# /usr/lib/arm-linux-gnueabihf/cmake, pkg-config files in .../pkgconfig) and the
# headers in /usr/include. scripts/setup-deps --cross armhf installs them.
# Tests run under qemu-user through CMAKE_CROSSCOMPILING_EMULATOR.
# docs/building.md explains each setting.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_CXX_COMPILER arm-linux-gnueabihf-g++)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)

# Where find_* look: the cross toolchain's own root, and "/" so that, with
# CMAKE_LIBRARY_ARCHITECTURE above, the multiarch dirs /usr/lib/arm-linux-gnueabihf
# (libraries, package configs) and /usr/include are searched, plus the
# architecture-independent /usr/share/cmake and /usr/lib/cmake (nlohmann_json,
# doctest). Host libraries live in /usr/lib/x86_64-linux-gnu, which is never
# searched, so no host library can be picked up by mistake.
set(CMAKE_FIND_ROOT_PATH /usr/arm-linux-gnueabihf /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # build tools run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (libgpiod, and FindOpenSSL's hints) must see only target .pc files.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/arm-linux-gnueabihf/pkgconfig:/usr/share/pkgconfig)
unset(ENV{PKG_CONFIG_PATH})
unset(ENV{PKG_CONFIG_SYSROOT_DIR})

# ctest (and try_run) run target binaries under qemu-user. `-L /`: the ARM
# program loads Debian's multiarch loader and libc (/lib/arm-linux-gnueabihf, pulled in
# by every :<arch> -dev package), exactly as on the board. Not
# `-L /usr/arm-linux-gnueabihf`: that gives the cross toolchain's ld.so but still the
# multiarch libc.so.6 (the loader searches /lib/arm-linux-gnueabihf first), and
# that mismatched pair makes Paho spin forever on a refused connect.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /)
