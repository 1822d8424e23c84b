# find_package(residency) on an install (make install): the INTERFACE target
# residency::residency, whose include directory holds residency.h and residency_http.h.
# This file is PREFIX/share/cmake/residency/residency-config.cmake.
get_filename_component(_residency_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET residency::residency)
  add_library(residency::residency INTERFACE IMPORTED)
  set_target_properties(residency::residency PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_residency_prefix}/include/residency")
endif()
unset(_residency_prefix)
