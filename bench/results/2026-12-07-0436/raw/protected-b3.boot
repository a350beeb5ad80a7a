PASS protected mode-line kvm [1]: Protected hVHE mode initialized successfully
PASS protected b_2M_w10_2_mp_f0_wp1_c1
PASS protected b_2M_w10_2_mp_f1_wp1_c1
PASS protected b_2M_w10_1_mp_f0_wp1_c1
PASS protected b_0_w10_1_mp_f1_wp1_c1
PASS protected b_0_w10_1_mp_f0_wp1_c1
PASS protected b_2M_w100_1_mp_f0_wp1_c1
PASS protected b_2M_w100_1_mp_f1_wp1_c1
PASS protected b_2M_w100_2_mp_f0_wp1_c1
PASS protected b_2M_w10_1_mp_f1_wp1_c1
PASS protected b_2M_w100_2_mp_f1_wp1_c1
PASS protected b_2M_w10_1_mp_f1_wp1_c0
PASS protected serial-log clean (30s)
