# Installs the frost build tree to a fresh prefix, then configures, builds and
# runs tests/install_consumer against it, as a user of find_package(frost) would.
# Run by the install_consumer CTest test; the -D variables come from CMakeLists.txt.

foreach(var FROST_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "test_install_consumer: ${var} is not set")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

function(run)
  message(STATUS "+ ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "test_install_consumer: command failed (${rc}): ${ARGN}")
  endif()
endfunction()

set(config_args)
if(CONFIG)
  list(APPEND config_args --config "${CONFIG}")
endif()

run("${CMAKE_COMMAND}" --install "${FROST_BINARY_DIR}" --prefix "${prefix}" ${config_args})

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_PREFIX_PATH=${prefix}")
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CONFIG)
  list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()
# The header-only consumer compiles all of frost's CPU kernels in its one
# file: 110 s at -O3, 39 s at -O1, and this test checks that the installed
# package builds and links, not how fast it runs.
list(APPEND configure_args "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
# A frost built with CUDA: the consumer links frost::cuda too (one
# architecture, to compile its kernels once; no GPU is needed to build).
if(CUDA_COMPILER)
  list(APPEND configure_args -DFROST_CONSUMER_CUDA=ON "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}"
    -DCMAKE_CUDA_ARCHITECTURES=90)
endif()
# Dependencies found somewhere unusual for frost's own build must be found there again.
foreach(dep Eigen3_DIR nlohmann_json_DIR)
  if(${dep})
    list(APPEND configure_args "-D${dep}=${${dep}}")
  endif()
endforeach()
run("${CMAKE_COMMAND}" ${configure_args})

# The consumer must have found the installed package, not a build tree.
file(STRINGS "${build}/CMakeCache.txt" frost_dir_line REGEX "^frost_DIR:")
string(REGEX REPLACE "^frost_DIR:[A-Z]+=" "" frost_dir "${frost_dir_line}")
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${frost_dir}" real_frost_dir)
string(FIND "${real_frost_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "test_install_consumer: frost_DIR is '${frost_dir}', not under '${prefix}'")
endif()

run("${CMAKE_COMMAND}" --build "${build}" ${config_args})

set(consumers frost_install_consumer frost_install_consumer_compiled)
if(CUDA_COMPILER)
  list(APPEND consumers frost_install_consumer_cuda)
endif()
foreach(name IN LISTS consumers)
  set(consumer)
  foreach(candidate "${build}/${name}" "${build}/${name}.exe" "${build}/${CONFIG}/${name}.exe")
    if(NOT consumer AND EXISTS "${candidate}" AND NOT IS_DIRECTORY "${candidate}")
      set(consumer "${candidate}")
    endif()
  endforeach()
  if(NOT consumer)
    message(FATAL_ERROR "test_install_consumer: no ${name} built in ${build}")
  endif()
  run("${consumer}")
endforeach()
message(STATUS "install_consumer: OK (frost_DIR=${frost_dir})")
