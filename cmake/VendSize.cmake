# vend_compile_for_size(target ...)
# Compiles the targets for size (-Os) in every build but Debug, each function
# and datum in a section of its own so that a link with --gc-sections
# (vend_link_for_size) drops what the program never calls. For the device
# code: docs/design-decisions.md, "The device code is compiled for size".
function(vend_compile_for_size)
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-Os>
                           -ffunction-sections -fdata-sections)
  endforeach()
endfunction()

# vend_link_for_size(target)
# Links an executable without the sections nothing refers to, and with its
# relative relocations packed (DT_RELR: glibc 2.36, binutils 2.38) where the
# linker can: the loader then reads a table of a few KiB instead of ~50.
# binutils 2.40 packs them on x86 only; for ARM it warns "-z pack-relative-relocs
# ignored", which check_linker_flag would take for support.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_LINK_OPTIONS "-Wl,-z,pack-relative-relocs")
check_cxx_source_compiles("int main() { return 0; }" VEND_LINKER_PACKS_RELATIVE_RELOCS
                          FAIL_REGEX "pack-relative-relocs ignored")
unset(CMAKE_REQUIRED_LINK_OPTIONS)
function(vend_link_for_size target)
  target_link_options(${target} PRIVATE -Wl,--gc-sections)
  if(VEND_LINKER_PACKS_RELATIVE_RELOCS)
    target_link_options(${target} PRIVATE -Wl,-z,pack-relative-relocs)
  endif()
endfunction()
