# Debian package of the cloud agent: vend-agent_<version>_<arch>.deb.
#
#   cmake --build build/native && cpack --config build/native/CPackAgentConfig.cmake
#   -> build/native/packages/vend-agent_<version>_amd64.deb (from any directory)
#
# The firmware's package (firmware/packaging/CPack.cmake) owns the build
# tree's CPackConfig.cmake; this one writes CPackAgentConfig.cmake. CPack's
# include guard is per directory, so each folder includes CPack once.
#
# Only the "agent" install component goes in. The agent is built natively
# only, so dpkg-shlibdeps computes the library dependencies; the
# architecture is the host's (dpkg --print-architecture). scripts/check-agent-deb
# checks the result.

set(CPACK_OUTPUT_CONFIG_FILE "${CMAKE_BINARY_DIR}/CPackAgentConfig.cmake")
set(CPACK_SOURCE_OUTPUT_CONFIG_FILE "${CMAKE_BINARY_DIR}/CPackAgentSourceConfig.cmake")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vend-agent)
set(CPACK_PACKAGE_VENDOR "Vend")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Vend cloud agent (orders, payments, MQTT dispatch to vending machines)")
set(CPACK_PACKAGE_DESCRIPTION
  "Takes orders and payment notifications over HTTP, reserves stock, and sends signed\n\
dispense commands with one-use sale tokens to the machines of a Vend fleet over MQTT.\n\
Every order, payment and device result is committed to SQLite (or PostgreSQL) before it is\n\
answered.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packages")
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};vend;agent;/")
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME vend-agent)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "Vend cloud team <cloud@vend.invalid>")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The postinst creates the user with systemd-sysusers, else adduser.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd | adduser")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${CMAKE_CURRENT_LIST_DIR}/postinst;${CMAKE_CURRENT_LIST_DIR}/prerm;${CMAKE_CURRENT_LIST_DIR}/postrm;${CMAKE_CURRENT_LIST_DIR}/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
