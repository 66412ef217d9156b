# Passed as -DCMAKE_PROJECT_INCLUDE=... when an interface package is built against the ROS 2 wheels
# from PyPI (Makefile target `msgs`), never on a ROS install. The wheels' exported CMake targets name
# include directories of the machine they were built on (/opt/python/cp311-cp311/include/python3.11);
# CMake refuses to generate with a missing directory, so such entries are dropped once every target of
# the top-level directory is known.
function(_ros_lnn_drop_missing_include_dirs)
  get_directory_property(targets DIRECTORY "${CMAKE_SOURCE_DIR}" IMPORTED_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT dirs)
      continue()
    endif()
    set(kept "")
    foreach(dir IN LISTS dirs)
      if(dir MATCHES "^\\$<" OR EXISTS "${dir}")
        list(APPEND kept "${dir}")
      endif()
    endforeach()
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${kept}")
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _ros_lnn_drop_missing_include_dirs)
