// The data source the TypeORM CLI uses to generate migrations:
//   npm run build:test && DATABASE_URL=... npx typeorm migration:generate -d build/ormconfig.js src/database/migrations/<dialect>/<What>
import { DataSource } from 'typeorm';
import { loadConfig } from './src/config/config.js';
import { dataSourceOptions } from './src/database/data-source.js';
import { ENTITIES } from './src/entities.js';

export default new DataSource(dataSourceOptions(loadConfig(), ENTITIES));
