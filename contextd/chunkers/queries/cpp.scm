; Names a C++ chunk uses: calls, includes, base classes.
(call_expression function: (identifier) @ref)
(call_expression function: (field_expression field: (field_identifier) @ref))
(call_expression function: (qualified_identifier) @ref)
(preproc_include path: (_) @ref)
(base_class_clause (type_identifier) @ref)
; `T x(std::move(y));` in a body: tree-sitter-cpp 0.23 reads the most vexing parse as a
; function declaration whose parameter type is the called name.
(compound_statement (declaration declarator: (function_declarator parameters: (parameter_list
  (parameter_declaration type: (qualified_identifier) @ref declarator: (abstract_function_declarator))))))
