# SPDX-License-Identifier: MIT
# The shared parts are included whole; a script that does not call one of their
# functions would still create its closure on every call (~0.6 µs each on a cold
# server). lua_drop_unused(VAR) drops from the script in VAR each top-level function
# it does not use: a block from a line 'local function NAME(' to the first line after
# it that is 'end' alone (or that line itself when it ends in ' end'). NAME is used
# when it occurs, as a whole word, outside the block and outside whole-line comments.
# Repeated until nothing more goes: a dropped function may have been another's only
# caller.
function(lua_drop_unused var)
  set(text "${${var}}")
  set(again TRUE)
  while(again)
    set(again FALSE)
    string(REGEX MATCHALL "\nlocal function [A-Za-z_][A-Za-z0-9_]*\\(" heads "\n${text}")
    foreach(head IN LISTS heads)
      string(REGEX REPLACE "^\nlocal function ([A-Za-z0-9_]+)\\($" "\\1" name "${head}")
      string(FIND "\n${text}" "${head}" at) # in text: where 'local function' starts
      string(SUBSTRING "${text}" ${at} -1 rest)
      string(FIND "${rest}" "\n" eol)
      string(SUBSTRING "${rest}" 0 ${eol} first)
      if(first MATCHES " end$")
        math(EXPR len "${eol} + 1")
      else()
        string(FIND "${rest}" "\nend\n" stop)
        if(stop LESS 0)
          message(FATAL_ERROR "lua_drop_unused: no 'end' line closes local function ${name}")
        endif()
        math(EXPR len "${stop} + 5")
      endif()
      string(SUBSTRING "${rest}" 0 ${len} block)
      string(REPLACE "${block}" "" others "${text}")
      string(REGEX REPLACE "(^|\n)[ \t]*--[^\n]*" "" code "${others}")
      if(NOT code MATCHES "(^|[^A-Za-z0-9_])${name}([^A-Za-z0-9_]|$)")
        string(REPLACE "${block}" "" text "${text}")
        set(again TRUE)
        break()
      endif()
    endforeach()
  endwhile()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()
