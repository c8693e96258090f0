; Names a Kotlin chunk uses: calls, imports, supertypes (tree-sitter-kotlin 1.x node types).
(call_expression . (identifier) @ref)
(call_expression . (navigation_expression (identifier) @ref .))
; `!f(x)`: the grammar puts the prefix operator around the called name.
(call_expression . (unary_expression argument: (identifier) @ref))
; `f<T>(x)` / `f<T> { }` as a statement is read as two comparisons; Kotlin does not allow
; chained comparisons, so `a < b > c` is always such a call of `a`.
(binary_expression left: (binary_expression left: (identifier) @ref operator: "<") operator: ">")
(import (qualified_identifier) @ref)
(delegation_specifier (user_type (identifier) @ref))
(delegation_specifier (constructor_invocation (user_type (identifier) @ref)))
