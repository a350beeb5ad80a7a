PASS protected-nvhe mode-line kvm [1]: Protected nVHE mode initialized successfully
PASS protected-nvhe g_bitmap_1_f0
PASS protected-nvhe g_bitmap_1_f1
PASS protected-nvhe g_ring_1_f0
PASS protected-nvhe g_ring_2_f1
PASS protected-nvhe g_ring_2_f0
PASS protected-nvhe g_bitmap_2_f1
PASS protected-nvhe g_bitmap_2_f0
PASS protected-nvhe g_ring_1_f1
PASS protected-nvhe serial-log clean (34s)
