# Runs COMMAND (a ;-list) and checks its exit code and output.
#   -DCOMMAND=...        the command line
#   -DEXPECT_CODE=N      the exit code it must return
#   -DEXPECT_REGEX=...   optional: regexes separated by @@ that stdout+stderr must all match
#   -DREJECT_REGEX=...   optional: a regex the output must not match
#   -DWORKDIR=...        optional working directory
#   -DTIMEOUT=...        optional, seconds (default 300)
if(NOT TIMEOUT)
  set(TIMEOUT 300)
endif()
if(NOT WORKDIR)
  set(WORKDIR ${CMAKE_CURRENT_BINARY_DIR})
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY ${WORKDIR} TIMEOUT ${TIMEOUT})
set(all "${out}${err}")
if(NOT code STREQUAL EXPECT_CODE)
  message(FATAL_ERROR "exit code ${code}, expected ${EXPECT_CODE}\n--- output ---\n${all}")
endif()
string(REPLACE "@@" ";" regexes "${EXPECT_REGEX}")
foreach(regex IN LISTS regexes)
  if(NOT all MATCHES "${regex}")
    message(FATAL_ERROR "output does not match '${regex}'\n--- output ---\n${all}")
  endif()
endforeach()
if(REJECT_REGEX AND all MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "output matches rejected '${REJECT_REGEX}'\n--- output ---\n${all}")
endif()
message(STATUS "ok: exit ${code}\n${all}")
