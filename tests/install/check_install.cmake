# Installs the build tree into a scratch prefix, then configures, builds and runs
# tests/install/consumer against it: proof that find_package(shellsim) works.
#   -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=...
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "failed (${code}): ${ARGN}\n${out}${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
# The program in docs/api.md (its one C++ block) is built and run too, so it cannot rot.
file(READ ${SOURCE_DIR}/docs/api.md api_doc)
if(NOT api_doc MATCHES "```cpp\n(.*)\n```")
  message(FATAL_ERROR "docs/api.md: no ```cpp block")
endif()
file(WRITE ${WORK_DIR}/api_example.cpp "${CMAKE_MATCH_1}\n")
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DAPI_EXAMPLE=${WORK_DIR}/api_example.cpp)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer ${WORK_DIR}/frames)
run(${WORK_DIR}/build/api_example)
