// RUN: fd-opt %s -split-input-file -convert-fd-to-loops -verify-diagnostics

// FP8 caches pass the verifier and fd-split-kv; the loop lowering says it
// does not lower them yet rather than failing to legalize.
func.func @fp8_cache(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %s: memref<1xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{convert-fd-to-loops: fp8 caches are not lowered to loops yet: expected f16, bf16 or f32 caches}}
  fd.attention %q, %k, %v, %l k_scale %s : memref<1xf32> v_scale %s : memref<1xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}
