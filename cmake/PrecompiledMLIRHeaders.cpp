// The translation unit that compiles PrecompiledMLIRHeaders.cmake's header.
