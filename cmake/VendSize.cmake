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
include(CheckLinkerFlag)
check_linker_flag(CXX "-Wl,-z,pack-relative-relocs" VEND_HAVE_PACK_RELATIVE_RELOCS)
function(vend_link_for_size target)
  target_link_options(${target} PRIVATE -Wl,--gc-sections)
  if(VEND_HAVE_PACK_RELATIVE_RELOCS)
    target_link_options(${target} PRIVATE -Wl,-z,pack-relative-relocs)
  endif()
endfunction()
