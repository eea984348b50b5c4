package clickhouse

import (
	"math"
	"math/bits"
)

// The estimate of dense registers, computed here rather than by the
// sketch's Estimate: that one takes math.Pow once a register (16,384 of
// them, about 0.4 ms a set), and a site series or breakdown estimates a
// set per bucket or value, which was most of a warm answer's Go time.
// This is the same LogLog-Beta estimate (Qin et al., 2016) that
// axiomhq/hyperloglog computes at precision 14, with the same floating
// point operations in the same order, so its result is the sketch's to
// the bit (TestRegistersEstimateIsTheSketchs).

// invPow2 is 2^-v for every value a register's six bits can hold:
// exact, as 1/math.Pow(2, v) is.
var invPow2 = func() (t [64]float64) {
	for v := range t {
		t[v] = math.Ldexp(1, -v)
	}
	return t
}()

// registersEstimate is the number of distinct hashes registers (2^14 of
// them, each at most maxRegister) hold.
func registersEstimate(regs []uint8) uint64 {
	var sum, ez float64
	for _, v := range regs {
		if v == 0 {
			ez++
		}
		sum += invPow2[v&63]
	}
	m := float64(linkRegisters)
	alpha := 0.7213 / (1 + 1.079/m)
	return uint64(alpha*m*(m-ez)/(sum+beta14(ez)) + 0.5)
}

// insertRegisters adds hashes to dense registers as the sketch's
// InsertHash does (mixed first, as compact inserts them): the top 14
// bits pick the register, which keeps the largest position of the first
// one bit in the rest.
func insertRegisters(regs []uint8, hashes []uint64) {
	for _, h := range hashes {
		x := mixHash(h)
		i := x >> (64 - linkPrecision)
		rho := uint8(bits.LeadingZeros64(x<<linkPrecision|1<<(linkPrecision-1))) + 1
		regs[i] = max(regs[i], rho)
	}
}

// beta14 is LogLog-Beta's bias correction at precision 14: a polynomial
// in log(ez+1) with the paper's coefficients for p = 14.
func beta14(ez float64) float64 {
	zl := math.Log(ez + 1)
	return -0.371009760230692*ez +
		0.00978811941207509*zl +
		0.185796293324165*math.Pow(zl, 2) +
		0.203015527328432*math.Pow(zl, 3) +
		-0.116710521803686*math.Pow(zl, 4) +
		0.0431106699492820*math.Pow(zl, 5) +
		-0.00599583540511831*math.Pow(zl, 6) +
		0.000449704299509437*math.Pow(zl, 7)
}
