# Debian package of the firmware: vend-firmware_<version>_<arch>.deb.
#
#   cmake --build build/aarch64 && cpack --config build/aarch64/CPackConfig.cmake
#   -> build/aarch64/packages/vend-firmware_<version>_arm64.deb (from any directory)
#
# CPack first builds the whole build tree (its "preinstall" step builds `all`,
# tests included), so a tree that does not build does not package.
#
# Only the "firmware" install component goes in. The architecture follows the
# toolchain (arm64, armhf, amd64). Depends is written out rather than computed
# by dpkg-shlibdeps, which cannot inspect foreign-architecture binaries; keep
# it in step with what vend-firmware links (check with `ldd` / `readelf -d`).

function(vend_debian_arch out)
  string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" cpu)
  if(cpu MATCHES "^(aarch64|arm64)$")
    set(arch arm64)
  elseif(cpu MATCHES "^arm")
    set(arch armhf)
  elseif(cpu MATCHES "^(x86_64|amd64)$")
    set(arch amd64)
  elseif(cpu MATCHES "^(i.86|x86)$")
    set(arch i386)
  else()
    message(FATAL_ERROR "vend-firmware packaging: no Debian architecture for '${cpu}'")
  endif()
  set(${out} ${arch} PARENT_SCOPE)
endfunction()

vend_debian_arch(VEND_DEB_ARCH)

# Versions as dpkg-shlibdeps computes them for a native Debian 12 build.
# SQLite is linked into vend-firmware (firmware/CMakeLists.txt): its security
# updates reach the devices with a rebuilt package, not through libsqlite3-0.
# libstdc++ and libgcc are shared: Paho MQTT C++ (libpaho-mqttpp3-1) uses
# them. glibc 2.36: packed relative relocations (DT_RELR, x86-64).
set(VEND_DEB_DEPENDS
  "libc6 (>= 2.36)"
  "libcpp-httplib0.11 (>= 0.11)"
  "libgcc-s1 (>= 3.0)"
  "libpaho-mqtt1.3 (>= 1.3.0)"
  "libpaho-mqttpp3-1 (>= 1.2.0)"
  "libssl3 (>= 3.0.0)"
  "libstdc++6 (>= 12)")
if(GPIOD_FOUND)
  list(APPEND VEND_DEB_DEPENDS "libgpiod2 (>= 1.1)")
endif()
list(JOIN VEND_DEB_DEPENDS ", " VEND_DEB_DEPENDS)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vend-firmware)
set(CPACK_PACKAGE_VENDOR "Vend")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Vend vending-machine firmware (token-gated dispensing over MQTT)")
set(CPACK_PACKAGE_DESCRIPTION
  "Runs a vending machine of the Vend fleet: dispenses only for commands signed with the\n\
device key that carry a valid sale token, keeps a crash-safe SQLite ledger of tokens,\n\
dispenses and events, and publishes events to the cloud agent over MQTT.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packages")
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};vend;firmware;/")
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME vend-firmware)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "Vend firmware team <firmware@vend.invalid>")
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${VEND_DEB_ARCH})
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${VEND_DEB_DEPENDS}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${CMAKE_CURRENT_LIST_DIR}/postinst;${CMAKE_CURRENT_LIST_DIR}/prerm;${CMAKE_CURRENT_LIST_DIR}/postrm;${CMAKE_CURRENT_LIST_DIR}/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
