PASS protected mode-line kvm [1]: Protected hVHE mode initialized successfully
PASS protected g_bitmap_2_f1
PASS protected g_bitmap_1_f1
PASS protected g_ring_1_f1
PASS protected g_ring_2_f1
PASS protected g_bitmap_2_f0
PASS protected g_ring_2_f0
PASS protected g_bitmap_1_f0
PASS protected g_ring_1_f0
PASS protected serial-log clean (36s)
