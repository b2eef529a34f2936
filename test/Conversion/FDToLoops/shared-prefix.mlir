// RUN: fd-opt %s -split-input-file -convert-fd-to-loops | FileCheck %s

// A shared prefix (cascade) on loops: the cache holds one sequence that
// every query sequence continues, so the keys and values (and the block
// table's row) are read at sequence 0, a constant, while the query and the
// output follow the loop's batch index b. The prefix's length P is
// seq_lens[0] (clamped to what the cache holds); suffix_lens[b] is read per
// query sequence, clamped to [0, 2^30], and P + suffix_lens[b] is where
// sequence b's Lq query tokens end: token t sits at P + s - Lq + t and sees
// the prefix's keys j < P up to its position (and within its window).

// CHECK-LABEL: func @dense
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<?x8x64xf32>, %[[K:[a-z0-9]+]]: memref<1x?x2x64xf32>, %[[V:[a-z0-9]+]]: memref<1x?x2x64xf32>, %[[LENS:[a-z0-9]+]]: memref<1xi32>, %[[SUFFIX:[a-z0-9]+]]: memref<?xi32>, %[[OUT:[a-z0-9]+]]: memref<?x8x64xf32>)
// CHECK: %[[LMAX:.*]] = memref.dim %[[K]], %c1 : memref<1x?x2x64xf32>
// CHECK: scf.for %[[B:[a-z0-9]+]] =
// The prefix's length, at index 0 whatever the query sequence.
// CHECK: %[[P_ENTRY:.*]] = memref.load %[[LENS]][%c0{{(_[0-9]+)?}}] : memref<1xi32>
// CHECK-NEXT: %[[P_READ:.*]] = arith.index_cast %[[P_ENTRY]] : i32 to index
// CHECK: %[[P_LOW:.*]] = arith.maxsi %[[P_READ]], %c0{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[P:.*]] = arith.minsi %[[P_LOW]], %[[LMAX]] : index
// The suffix, at the query sequence's index, clamped to [0, 2^30].
// CHECK: %[[S_ENTRY:.*]] = memref.load %[[SUFFIX]][%[[B]]] : memref<?xi32>
// CHECK-NEXT: %[[S_READ:.*]] = arith.index_cast %[[S_ENTRY]] : i32 to index
// CHECK-DAG: %[[MOST:.*]] = arith.constant 1073741824 : index
// CHECK-DAG: %[[S_LOW:.*]] = arith.maxsi %[[S_READ]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[S:.*]] = arith.minsi %[[S_LOW]], %[[MOST]] : index
// CHECK-NEXT: %[[END:.*]] = arith.addi %[[P]], %[[S]] : index
// The query (Lq = 1) at P + s - 1 sees the prefix's keys below min(P, P + s).
// CHECK: %[[BEFORE:.*]] = arith.subi %[[END]], %c1{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[AFTER_FIRST:.*]] = arith.addi %[[BEFORE]], %c1{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[AFTER:.*]] = arith.addi %[[AFTER_FIRST]], %{{.*}} : index
// CHECK-NEXT: %[[CAUSAL:.*]] = arith.minsi %[[P]], %[[AFTER]] : index
// CHECK-NEXT: %[[STOP:.*]] = arith.maxsi %{{.*}}, %[[CAUSAL]] : index
// CHECK: scf.for %[[KEY:[a-z0-9]+]] = %{{.*}} to %[[STOP]] step
// CHECK: memref.load %[[Q]][%[[B]], %{{.*}}, %{{.*}}] : memref<?x8x64xf32>
// CHECK-NEXT: memref.load %[[K]][%c0{{(_[0-9]+)?}}, %[[KEY]], %{{.*}}, %{{.*}}] : memref<1x?x2x64xf32>
// CHECK: memref.load %[[V]][%c0{{(_[0-9]+)?}}, %[[KEY]], %{{.*}}, %{{.*}}] : memref<1x?x2x64xf32>
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[B]], %{{.*}}, %{{.*}}] : memref<?x8x64xf32>
func.func @dense(%q: memref<?x8x64xf32>, %k: memref<1x?x2x64xf32>, %v: memref<1x?x2x64xf32>,
                 %lens: memref<1xi32>, %suffix: memref<?xi32>, %out: memref<?x8x64xf32>) {
  fd.attention %q, %k, %v, %lens suffix_lens %suffix : memref<?xi32> into %out
      : memref<?x8x64xf32>, memref<1x?x2x64xf32>, memref<1x?x2x64xf32>,
        memref<1xi32> into memref<?x8x64xf32>
  return
}

// -----

// Paged, Lq = 4, a window of 8 and ALiBi: the block table's one row (0, a
// constant) maps the prefix's keys; token t's position p = P + s - 4 + t
// (its ALiBi distance is j - p) bounds its keys to [max(0, p + 1 - 8),
// min(P, p + 1)).

// CHECK-LABEL: func @paged_window
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<?x4x8x64xf32>, %{{[a-z0-9]+}}: memref<?x16x2x64xf32>, %{{[a-z0-9]+}}: memref<?x16x2x64xf32>, %[[LENS:[a-z0-9]+]]: memref<1xi32>, %[[TABLE:[a-z0-9]+]]: memref<1x?xi32>, %{{[a-z0-9]+}}: memref<8xf32>, %[[SUFFIX:[a-z0-9]+]]: memref<?xi32>, %[[OUT:[a-z0-9]+]]: memref<?x4x8x64xf32>)
// CHECK: scf.for %[[B:[a-z0-9]+]] =
// CHECK: scf.for %[[T:[a-z0-9]+]] = %{{.*}} to %c4 step
// CHECK: memref.load %[[LENS]][%c0{{(_[0-9]+)?}}] : memref<1xi32>
// CHECK: %[[P:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: memref.load %[[SUFFIX]][%[[B]]] : memref<?xi32>
// CHECK: %[[S:.*]] = arith.minsi %{{.*}}, %c1073741824 : index
// CHECK-NEXT: %[[END:.*]] = arith.addi %[[P]], %[[S]] : index
// The position, for ALiBi.
// CHECK: %[[BEFORE:.*]] = arith.subi %[[END]], %c4{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[AFTER_FIRST:.*]] = arith.addi %[[BEFORE]], %c1{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[AFTER:.*]] = arith.addi %[[AFTER_FIRST]], %[[T]] : index
// CHECK: %[[POS:.*]] = arith.subi %[[AFTER]], %c1{{(_[0-9]+)?}} : index
// The window and the causal rule at that position.
// CHECK: %[[BEFORE2:.*]] = arith.subi %[[END]], %c4{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[AFTER_FIRST2:.*]] = arith.addi %[[BEFORE2]], %c1{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[AFTER2:.*]] = arith.addi %[[AFTER_FIRST2]], %[[T]] : index
// CHECK: %[[WINDOW:.*]] = arith.subi %[[AFTER2]], %c8{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[START:.*]] = arith.maxsi %c0{{(_[0-9]+)?}}, %[[WINDOW]] : index
// CHECK-NEXT: %[[CAUSAL:.*]] = arith.minsi %[[P]], %[[AFTER2]] : index
// CHECK-NEXT: %[[STOP:.*]] = arith.maxsi %[[START]], %[[CAUSAL]] : index
// CHECK: scf.for %[[KEY:[a-z0-9]+]] = %[[START]] to %[[STOP]] step
// CHECK: memref.load %[[TABLE]][%c0{{(_[0-9]+)?}}, %{{.*}}] : memref<1x?xi32>
// CHECK: memref.load %[[Q]][%[[B]], %[[T]], %{{.*}}, %{{.*}}] : memref<?x4x8x64xf32>
// CHECK: %[[DISTANCE:.*]] = arith.subi %[[KEY]], %[[POS]] : index
// CHECK-NEXT: arith.index_cast %[[DISTANCE]] : index to i32
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[B]], %[[T]], %{{.*}}, %{{.*}}] : memref<?x4x8x64xf32>
func.func @paged_window(%q: memref<?x4x8x64xf32>, %k: memref<?x16x2x64xf32>, %v: memref<?x16x2x64xf32>,
                        %lens: memref<1xi32>, %table: memref<1x?xi32>, %a: memref<8xf32>,
                        %suffix: memref<?xi32>, %out: memref<?x4x8x64xf32>) {
  fd.attention %q, %k, %v, %lens block_table %table : memref<1x?xi32> alibi_slopes %a : memref<8xf32> suffix_lens %suffix : memref<?xi32> into %out {window_left = 8}
      : memref<?x4x8x64xf32>, memref<?x16x2x64xf32>, memref<?x16x2x64xf32>,
        memref<1xi32> into memref<?x4x8x64xf32>
  return
}

// -----

// Splits divide the prefix's keys [0, P) alone, whatever the suffix: split
// i's chunk starts at i * ceil(P / 3); the suffix only ends the keys a row
// sees.

// CHECK-LABEL: func @partial
// CHECK-SAME: %[[SUFFIX:[a-z0-9]+]]: memref<?xi32>
// CHECK: scf.for %[[B:[a-z0-9]+]] =
// CHECK-NEXT: scf.for %[[SPLIT:[a-z0-9]+]] = %{{.*}} to %c3 step
// CHECK: %[[P:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: memref.load %[[SUFFIX]][%[[B]]] : memref<?xi32>
// CHECK: %[[END:.*]] = arith.addi %[[P]], %{{.*}} : index
// CHECK: %[[KEYS:.*]] = arith.subi %[[P]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[CHUNK:.*]] = arith.ceildivsi %[[KEYS]], %c3{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[OFFSET:.*]] = arith.muli %[[SPLIT]], %[[CHUNK]] : index
func.func @partial(%q: memref<?x8x64xf32>, %k: memref<1x?x2x64xf32>, %v: memref<1x?x2x64xf32>,
                   %lens: memref<1xi32>, %suffix: memref<?xi32>,
                   %po: memref<?x8x3x64xf32>, %pl: memref<?x8x3xf32>) {
  fd.partial_attention %q, %k, %v, %lens suffix_lens %suffix : memref<?xi32> into %po, %pl
      : memref<?x8x64xf32>, memref<1x?x2x64xf32>, memref<1x?x2x64xf32>,
        memref<1xi32> into memref<?x8x3x64xf32>, memref<?x8x3xf32>
  return
}
