# vend_forbid_links(TARGET t FORBIDDEN dep ...)
# Fails the configure step when `t` links anything whose name contains one
# of the FORBIDDEN words (case-insensitive: "paho" matches
# eclipse-paho-mqtt-c::paho-mqtt3as), directly or through its dependencies
# (LINK_LIBRARIES and INTERFACE_LINK_LIBRARIES, followed recursively;
# $<LINK_ONLY:x> counts).
# The cores use it to stay free of network and I/O libraries: threads,
# sockets and libraries belong to the shells (CONVENTIONS.md).
# Call it at the end of the top-level CMakeLists.txt, once every target exists.

function(_vend_link_closure target out_var)
  set(seen "")
  set(todo "${target}")
  while(todo)
    list(POP_FRONT todo item)
    # $<LINK_ONLY:x> (a static library's private dependency) links x too.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item STREQUAL "" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    if(TARGET "${item}")
      get_target_property(aliased "${item}" ALIASED_TARGET)
      if(aliased)
        list(APPEND todo "${aliased}")
      endif()
      get_target_property(type "${item}" TYPE)
      set(props INTERFACE_LINK_LIBRARIES)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        list(APPEND props LINK_LIBRARIES)
      endif()
      foreach(prop IN LISTS props)
        get_target_property(deps "${item}" ${prop})
        if(deps)
          list(APPEND todo ${deps})
        endif()
      endforeach()
    endif()
  endwhile()
  set(${out_var} "${seen}" PARENT_SCOPE)
endfunction()

function(vend_forbid_links)
  cmake_parse_arguments(L "" "TARGET" "FORBIDDEN" ${ARGN})
  _vend_link_closure(${L_TARGET} closure)
  foreach(dep IN LISTS L_FORBIDDEN)
    string(TOLOWER "${dep}" word)
    foreach(linked IN LISTS closure)
      string(TOLOWER "${linked}" name)
      string(FIND "${name}" "${word}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR
          "${L_TARGET} is a core target and must not link ${dep} (found '${linked}' in its "
          "link closure: ${closure}). Move the code that needs it into a shell target.")
      endif()
    endforeach()
  endforeach()
endfunction()
