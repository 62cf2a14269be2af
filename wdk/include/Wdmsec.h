/* Wdmsec.h: the spelling some sources use for <wdmsec.h> (libndk WDK kit). */
#include <wdmsec.h>
