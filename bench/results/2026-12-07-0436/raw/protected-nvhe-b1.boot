PASS protected-nvhe mode-line kvm [1]: Protected nVHE mode initialized successfully
PASS protected-nvhe b_2M_w100_1_mp_f0_wp1_c1
PASS protected-nvhe b_2M_w10_1_mp_f1_wp1_c0
PASS protected-nvhe b_2M_w100_2_mp_f0_wp1_c1
PASS protected-nvhe b_0_w10_1_mp_f1_wp1_c1
PASS protected-nvhe b_2M_w10_2_mp_f1_wp1_c1
PASS protected-nvhe b_2M_w100_2_mp_f1_wp1_c1
PASS protected-nvhe b_2M_w10_2_mp_f0_wp1_c1
PASS protected-nvhe b_0_w10_1_mp_f0_wp1_c1
PASS protected-nvhe b_2M_w10_1_mp_f0_wp1_c1
PASS protected-nvhe b_2M_w100_1_mp_f1_wp1_c1
PASS protected-nvhe b_2M_w10_1_mp_f1_wp1_c1
PASS protected-nvhe serial-log clean (36s)
