# A smoke run that reads what its program printed:
#
#   cmake [-DEXPECT=<regex>] [-DFORBID=<regex>] -P check-output.cmake -- <program> <arguments>...
#
# Runs the program and fails unless it exits with 0, its output (stdout and
# stderr together) matches EXPECT (its verdict line), and nothing of it
# matches FORBID (what it prints when something went wrong). A program that
# says LEAK or MISMATCH and exits 0 anyway fails the test; so does one that
# stops before its verdict. The output is passed on, for the test's log.
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    string(REPLACE ";" "\\;" argument "${CMAKE_ARGV${i}}")  # one argument, whatever it holds
    list(APPEND command "${argument}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "usage: cmake [-DEXPECT=<regex>] [-DFORBID=<regex>] -P check-output.cmake -- <program> <arguments>...")
endif()

list(JOIN command " " shown)
execute_process(COMMAND ${command} OUTPUT_VARIABLE output ERROR_VARIABLE output RESULT_VARIABLE status)
message("${output}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${shown}: exited with ${status}")
endif()
if(DEFINED FORBID AND output MATCHES "${FORBID}")
  message(FATAL_ERROR "${shown}: printed `${CMAKE_MATCH_0}`")
endif()
if(DEFINED EXPECT AND NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "${shown}: printed nothing matching `${EXPECT}`")
endif()
