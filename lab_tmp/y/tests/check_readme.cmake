# Fails unless README.md contains examples/minimal.c verbatim (so the README's example is the compiled one).
file(READ ${README} readme)
file(READ ${EXAMPLE} example)
string(FIND "${readme}" "${example}" where)
if(where EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/minimal.c verbatim: update the README's example")
endif()
message(STATUS "README example matches examples/minimal.c")
