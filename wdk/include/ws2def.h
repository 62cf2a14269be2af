/* ws2def.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_WS2DEF_H
#define NDKWDK_WS2DEF_H
#include <ndkwdk/ws2.h>
#endif
